"""ACP v2 beside v1 (`acp_bridge.protocol.v2`), through the real subprocess.

A client that asks ``initialize`` for ``protocolVersion: 2`` gets v2: the
prompt is answered at once with its user message's ``messageId``, the turn's
progress is ``state_update`` (``running``, ``requires_action`` while a
permission waits, ``idle`` with the stop reason), and a Stop is confirmed by
``idle(cancelled)`` after every update of the turn.  Every frame the bridge
writes is validated against v2's schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp_schema import load_acp_v2_schema
from support.harness import run_bridge, tool_call, write_script

from acp_bridge.client import AcpClient, prompt_params
from acp_bridge.providers.scripted import parse_report

pytestmark = pytest.mark.anyio

Json = dict[str, Any]
PREFIX = "Hello from the interrupted message"
ASKED = ["last_user_text", "last_assistant_text", "last_assistant_interrupted"]
V2_INIT = {"protocolVersion": 2, "info": {"name": "v2-test", "version": "1"}, "capabilities": {}}


def _script(tmp_path: Path) -> Path:
    first = {"events": [{"text": PREFIX, "chunk_size": 5}, {"hang": True}]}
    return write_script(
        tmp_path,
        {"when_exhausted": "repeat_last", "responses": [first, {"events": [{"report": ASKED}]}]},
    )


def _states(updates: list[Json]) -> list[str]:
    return [u["state"] for u in updates if u["sessionUpdate"] == "state_update"]


def _text(updates: list[Json], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


async def _idle(client: AcpClient, since: int) -> Json:
    """The ``idle`` state update after update ``since``."""

    def found() -> Json | None:
        for u in client.updates[since:]:
            if u["sessionUpdate"] == "state_update" and u["state"] == "idle":
                return u
        return None

    await client.wait_until(lambda: found() is not None)
    idle = found()
    assert idle is not None
    return idle


async def test_v2_prompt_stop_and_follow_up(tmp_path: Path) -> None:
    """A prompt answered with its messageId; a Stop confirmed by idle(cancelled)
    with every chunk before it and none after; the follow-up's request holds
    the interrupted text; and a resume in a new process replays the same ids."""
    box: Json = {}
    ws = tmp_path / "ws"
    ws.mkdir()

    async def play(client: AcpClient) -> None:
        box["init"] = (await client.request("initialize", V2_INIT))["result"]
        new = (await client.request("session/new", {"cwd": str(ws)}))["result"]
        sid = box["sid"] = new["sessionId"]
        start = len(client.updates)
        box["answer"] = (await client.request("session/prompt", prompt_params(sid, "first")))[
            "result"
        ]
        await client.wait_until(lambda: len(_text(client.updates[start:])) >= 10)
        await client.notify("session/cancel", {"sessionId": sid})
        idle = await _idle(client, start)
        box["stopped"] = client.updates[start:]
        box["idle"] = idle
        second = len(client.updates)
        box["answer2"] = (await client.request("session/prompt", prompt_params(sid, "second")))[
            "result"
        ]
        box["idle2"] = await _idle(client, second)
        box["second"] = client.updates[second:]
        # session/load is not v2's; neither is set_mode.
        box["load"] = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []}
        )

    run = await run_bridge(_script(tmp_path), tmp_path / "state", play)
    schema = load_acp_v2_schema()
    schema.check_transcript(run.client.transcript)

    assert box["init"]["protocolVersion"] == 2
    assert box["init"]["info"]["name"] == "acp-bridge"
    first_id = box["answer"]["messageId"]
    assert first_id.startswith("msg_user_")
    stopped: list[Json] = box["stopped"]
    assert _states(stopped)[0] == "running"
    assert box["idle"]["stopReason"] == "cancelled"
    # Every chunk of the stopped turn came before its idle, under one message id.
    idle_at = stopped.index(box["idle"])
    assert all(u["sessionUpdate"] != "agent_message_chunk" for u in stopped[idle_at + 1 :])
    chunks = [u for u in stopped if u["sessionUpdate"] == "agent_message_chunk"]
    assert len({u["messageId"] for u in chunks}) == 1
    delivered = _text(stopped)
    assert delivered
    assert PREFIX.startswith(delivered)
    # The follow-up's model request holds the interrupted message, as delivered.
    assert box["idle2"]["stopReason"] == "end_turn"
    facts = parse_report(_text(box["second"]))
    assert facts["last_user_text"] == "second"
    assert facts["last_assistant_text"] == delivered
    assert facts["last_assistant_interrupted"] is True
    assert box["answer2"]["messageId"] != first_id
    assert box["load"]["error"]["code"] == -32601

    # A resume over v2 in a new process replays the conversation, same ids.
    replay: Json = {}

    async def resume(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        params = {"sessionId": box["sid"], "cwd": str(ws), "replayFrom": {"type": "start"}}
        replay["answer"] = (await client.request("session/resume", params))["result"]
        replay["updates"] = list(client.updates)

    again = await run_bridge(_script(tmp_path), tmp_path / "state", resume)
    schema.check_transcript(again.client.transcript)
    users = [u for u in replay["updates"] if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["messageId"] for u in users] == [first_id, box["answer2"]["messageId"]]
    agent = [u for u in replay["updates"] if u["sessionUpdate"] == "agent_message_chunk"]
    assert agent[0]["messageId"] == chunks[0]["messageId"]
    assert agent[0]["content"]["text"] == delivered


async def test_v1_client_and_protocol_1(tmp_path: Path) -> None:
    """A client asking for 1 gets v1; with ``--protocol 1`` one asking for 2 does too."""
    seen: list[Json] = []

    async def play(client: AcpClient) -> None:
        seen.append((await client.request("initialize", V2_INIT))["result"])

    await run_bridge(_script(tmp_path), tmp_path / "state", play, extra=("--protocol", "1"))
    assert seen[0]["protocolVersion"] == 1
    assert "agentCapabilities" in seen[0]

    async def play_v1(client: AcpClient) -> None:
        v1 = {"protocolVersion": 1, "clientCapabilities": {}}
        seen.append((await client.request("initialize", v1))["result"])

    await run_bridge(_script(tmp_path), tmp_path / "state", play_v1)
    assert seen[1]["protocolVersion"] == 1


async def test_v2_permission_and_local_command(tmp_path: Path) -> None:
    """A v2 session runs its command itself after a permission in v2's shape;
    the turn ``requires_action`` while it waits."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(
        tmp_path,
        {
            "responses": [
                {"events": [tool_call("call_1", "run_command", command="echo v2-ran")]},
                {"events": [{"report": ["tool_results"]}]},
            ],
            "when_exhausted": "error",
        },
    )
    asked: list[Json] = []
    box: Json = {}

    async def allow(params: Json) -> Json:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async def play(client: AcpClient) -> None:
        client.handlers["session/request_permission"] = allow
        await client.request("initialize", V2_INIT)
        sid = (await client.request("session/new", {"cwd": str(ws)}))["result"]["sessionId"]
        await client.request("session/prompt", prompt_params(sid, "run it"))
        box["idle"] = await _idle(client, 0)
        box["updates"] = list(client.updates)

    run = await run_bridge(script, tmp_path / "state", play)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    assert box["idle"]["stopReason"] == "end_turn"
    assert asked
    assert asked[0]["subject"]["type"] == "tool_call"
    assert asked[0]["subject"]["toolCall"]["toolCallId"] == "call_1"
    states = _states(box["updates"])
    assert states[:4] == ["running", "requires_action", "running", "idle"]
    text = json.dumps(box["updates"])
    assert "v2-ran" in text
    assert not any(m == "terminal/create" for _, m in _methods(run.client))


def _methods(client: AcpClient) -> list[tuple[str, str]]:
    return [(d, e.get("method", "")) for d, e in client.transcript if isinstance(e, dict)]
