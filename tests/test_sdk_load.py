"""The official Python SDK loads, in a second process, a session it created in a
first one, and receives the updates it saw live (modulo chunking).

The first process plays a stopped turn and a finished one; the second loads
the session with ``load_session`` and then lists, resumes-by-load and forks it
through the SDK's own methods, so the SDK's models accept every response.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from test_sdk_client import (
    RecordingClient,
    as_client,
    close_and_wait,
    prompt_then_cancel,
    stderr_file,
)

pytestmark = pytest.mark.anyio

SCRIPT = {
    "when_exhausted": "repeat_last",
    "responses": [
        {
            "events": [
                {"reasoning": "A short story, then.", "chunk_size": 4},
                {"text": "Once upon a time there was a keeper.", "chunk_size": 4},
                {"hang": True},
            ]
        },
        {"events": [{"text": "It ended well.", "chunk_size": 3}]},
    ],
}


def view(updates: list[Any]) -> list[dict[str, Any]]:
    """The SDK's update models as JSON, chunks of one message joined, markers dropped."""
    out: list[dict[str, Any]] = []
    for model in updates:
        update = model.model_dump(mode="json", by_alias=True, exclude_none=True)
        if update["sessionUpdate"] == "available_commands_update":
            continue  # announced as a session opens (at the end of a load too), not replayed
        update.pop("_meta", None)
        previous = out[-1] if out else None
        kind = update["sessionUpdate"]
        if (
            previous is not None
            and kind in ("agent_message_chunk", "agent_thought_chunk")
            and previous["sessionUpdate"] == kind
            and previous.get("messageId") == update.get("messageId")
        ):
            text = previous["content"]["text"] + update["content"]["text"]
            previous["content"] = {**previous["content"], "text": text}
        else:
            out.append(update)
    return out


async def test_the_sdk_loads_a_session_from_another_process(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    args = ["-m", "acp_bridge", "--provider", "fake", "--script", str(script)]
    args += ["--state-dir", str(state)]
    live = RecordingClient()
    async with (
        stderr_file(tmp_path) as stderr,
        acp.spawn_agent_process(
            as_client(live),
            sys.executable,
            *args,
            env=dict(os.environ),
            transport_kwargs={"stderr": stderr},
        ) as (conn, proc),
    ):
        with anyio.fail_after(20):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            stopped = await prompt_then_cancel(conn, live, sid, "Tell me a story", 3)
            assert stopped.stop_reason == "cancelled"
            done = await conn.prompt(session_id=sid, prompt=[acp.text_block("And then?")])
            assert done.stop_reason == "end_turn"
        await close_and_wait(proc)

    loaded = RecordingClient()
    async with (
        stderr_file(tmp_path) as stderr,
        acp.spawn_agent_process(
            as_client(loaded),
            sys.executable,
            *args,
            env=dict(os.environ),
            transport_kwargs={"stderr": stderr},
        ) as (conn, proc),
    ):
        with anyio.fail_after(20):
            init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert init.agent_capabilities is not None
            assert init.agent_capabilities.load_session is True
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replayed = list(loaded.updates)
            listed = await conn.list_sessions(cwd=str(tmp_path))
            fork = await conn.fork_session(cwd=str(tmp_path), session_id=sid)
            await conn.close_session(session_id=fork.session_id)
        await close_and_wait(proc)

    # What the editor saw live: its own prompts are not echoed, so compare the rest.
    sent = [u for u in view(replayed) if u["sessionUpdate"] != "user_message_chunk"]
    assert sent == view(live.updates)
    users = [
        u["content"]["text"] for u in view(replayed) if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert users == ["Tell me a story", "And then?"]
    assert [s.session_id for s in listed.sessions] == [sid]
    assert listed.sessions[0].title == "Tell me a story"
    assert fork.session_id != sid
