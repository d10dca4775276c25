"""A reply cut by a crash is never told to the model as the user's Stop.

Through the real subprocess: a scripted session is killed (SIGKILL) while a
reply streams; a new process with a real provider (the loopback server)
loads it, and a fork of it is prompted too.  The request bodies the server
receives carry the crash's own note, and ``acp-bridge history`` prints the
same, because the wording follows from the log (a turn closed by recovery),
not from the process that saw the crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from provider_server import Reply, WireServer, openai_text
from support.bridge import running_bridge
from support.harness import chunks_seen, cwd_for_tests

from acp_bridge.client import bridge_command, prompt_params
from acp_bridge.log.check import check_history, check_log
from acp_bridge.log.reader import read_records, session_path
from acp_bridge.providers.notes import CRASHED_NOTE, INTERRUPTED_NOTE

pytestmark = pytest.mark.anyio

CWD = cwd_for_tests()
STORY = "Once upon a time,"
Json = dict[str, Any]


async def crash_mid_reply(state: Path, tmp_path: Path) -> tuple[str, str]:
    """A session killed while its reply streams: (its id, the text shown)."""
    script = tmp_path / "story.json"
    script.write_text(
        json.dumps(
            {
                "responses": [
                    {"events": [{"text": STORY, "chunk_size": 5}, {"hang": True}]},
                ],
                "when_exhausted": "repeat_last",
            }
        )
    )
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state)
    )
    async with running_bridge(command, stderr=subprocess.DEVNULL) as killed:
        with anyio.fail_after(30):
            await killed.initialize()
            sid = await killed.new_session(CWD)
            await killed.send(
                {
                    "jsonrpc": "2.0",
                    "id": killed.next_id(),
                    "method": "session/prompt",
                    "params": prompt_params(sid, "Tell me a story"),
                }
            )
            await killed.wait_until(chunks_seen(killed, 4))
        killed.agent.send_signal(signal.SIGKILL)
        await killed.agent.wait()
    shown = "".join(
        u["content"]["text"] for u in killed.updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    return sid, shown


def user_text(body: Json) -> str:
    """The text of the last user message of an OpenAI-compatible request body."""
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert isinstance(content, str)
    return content


async def test_a_reply_cut_by_a_crash_gets_its_own_note_after_load_and_fork(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    sid, shown = await crash_mid_reply(state, tmp_path)
    assert shown == STORY
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key")
    box: Json = {}
    with WireServer([Reply(openai_text(["Then."])), Reply(openai_text(["Forked."]))]) as server:
        command = bridge_command(
            "--provider", "openai", "--base-url", server.url, "--state-dir", str(state)
        )
        async with running_bridge(command, env=env, stderr=subprocess.DEVNULL) as client:
            with anyio.fail_after(30):
                await client.initialize()
                loaded = await client.request(
                    "session/load", {"sessionId": sid, "cwd": CWD, "mcpServers": []}
                )
                assert loaded["result"]["_meta"]["acpBridge"]["turns"] == [
                    {"turn": 1, "reason": "crashed"}
                ]
                fork = await client.request("session/fork", {"sessionId": sid, "cwd": CWD})
                box["fork"] = fork["result"]["sessionId"]
                assert (await client.prompt(sid, "Go on")).stop_reason == "end_turn"
                assert (await client.prompt(box["fork"], "Go on")).stop_reason == "end_turn"
            await client.finish(within=15)
    loaded_body, fork_body = (r.body for r in server.requests)
    for body in (loaded_body, fork_body):
        assistant = [m for m in body["messages"] if m["role"] == "assistant"]
        assert assistant == [{"role": "assistant", "content": STORY}]  # what the user saw
        assert user_text(body) == f"{CRASHED_NOTE}\n\nGo on"
        conversation = [m for m in body["messages"] if m["role"] != "system"]
        assert "pressed Stop" not in json.dumps(conversation)  # the system prompt explains Stop
    # The log says why: a turn closed by recovery, its message marked so.
    records = read_records(session_path(str(state), sid))
    check_log(records)
    [recovered] = [r for r in records if r["type"] == "assistant/message" and r["turn"] == 1]
    assert recovered["recovered"] == "crashed"
    # And `history` prints the note the model received.
    for session in (sid, box["fork"]):
        result = await anyio.run_process(
            [sys.executable, "-m", "acp_bridge", "history", "--state-dir", str(state), session],
            check=False,
        )
        assert result.returncode == 0, result.stderr
        history = json.loads(result.stdout)
        check_history(history)
        assert history[1] == {
            "role": "assistant",
            "content": [{"type": "text", "text": STORY}],
            "interrupted": True,
            "crashed": True,
        }
        assert history[2]["content"][0] == {"type": "text", "text": CRASHED_NOTE}
        assert INTERRUPTED_NOTE.encode() not in result.stdout
