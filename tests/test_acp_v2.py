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

import anyio
import pytest
from acp_schema import load_acp_schema, load_acp_v2_schema, load_acp_v2_unstable_schema
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


V1_INIT = {"protocolVersion": 1, "clientCapabilities": {}}


async def _one_turn(client: AcpClient, init: Json, cwd: str, text: str) -> tuple[str, Json]:
    """A session with one ended turn (the report script's second answer)."""
    await client.request("initialize", init)
    sid = (await client.request("session/new", {"cwd": cwd, "mcpServers": []}))["result"][
        "sessionId"
    ]
    answer = (await client.request("session/prompt", prompt_params(sid, text)))["result"]
    return sid, answer


def _report_script(tmp_path: Path) -> Path:
    return write_script(
        tmp_path, {"when_exhausted": "repeat_last", "responses": [{"events": [{"text": "hi"}]}]}
    )


async def test_a_v1_session_resumes_over_v2_and_back(tmp_path: Path) -> None:
    """The log is the one truth: a session made over v1 is resumed (with
    replay) over v2, and one made over v2 is loaded over v1."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = _report_script(tmp_path)
    box: Json = {}

    async def make_v1(client: AcpClient) -> None:
        box["v1"], _ = await _one_turn(client, V1_INIT, str(ws), "made over v1")

    async def make_v2(client: AcpClient) -> None:
        box["v2"], box["v2_answer"] = await _one_turn(client, V2_INIT, str(ws), "made over v2")
        await _idle(client, 0)

    await run_bridge(script, tmp_path / "state", make_v1)
    await run_bridge(script, tmp_path / "state", make_v2)

    async def resume_v1_over_v2(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        params = {"sessionId": box["v1"], "cwd": str(ws), "replayFrom": {"type": "start"}}
        box["resumed"] = await client.request("session/resume", params)
        box["v2_updates"] = list(client.updates)
        start = len(client.updates)
        box["next"] = await client.request("session/prompt", prompt_params(box["v1"], "again"))
        box["next_idle"] = await _idle(client, start)

    run = await run_bridge(script, tmp_path / "state", resume_v1_over_v2)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    assert "result" in box["resumed"]
    users = [u for u in box["v2_updates"] if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["made over v1"]
    assert users[0]["messageId"].startswith("msg_user_")
    assert _text(box["v2_updates"]) == "hi"
    assert box["next_idle"]["stopReason"] == "end_turn"

    async def load_v2_over_v1(client: AcpClient) -> None:
        await client.request("initialize", V1_INIT)
        params = {"sessionId": box["v2"], "cwd": str(ws), "mcpServers": []}
        box["loaded"] = await client.request("session/load", params)
        box["v1_updates"] = list(client.updates)

    run = await run_bridge(script, tmp_path / "state", load_v2_over_v1)
    load_acp_schema().check_transcript(run.client.transcript)
    assert "result" in box["loaded"]
    users = [u for u in box["v1_updates"] if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in users] == ["made over v2"]
    assert "messageId" not in users[0]  # v1's replay, unchanged
    assert _text(box["v1_updates"]) == "hi"


async def test_v2_session_methods(tmp_path: Path) -> None:
    """list, set_config_option (modes are a config option only), close,
    delete, auth/login and auth/logout in v2's shapes; v1's set_mode,
    authenticate, fork and load are not v2's (-32601)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        new = (await client.request("session/new", {"cwd": str(ws)}))["result"]
        sid = new["sessionId"]
        box["new"] = new
        box["list"] = await client.request("session/list", {})
        box["mode"] = await client.request(
            "session/set_config_option",
            {"sessionId": sid, "configId": "mode", "type": "id", "value": "read_only"},
        )
        box["set_mode"] = await client.request(
            "session/set_mode", {"sessionId": sid, "modeId": "ask"}
        )
        box["authenticate"] = await client.request("authenticate", {"methodId": "api-key"})
        box["fork"] = await client.request("session/fork", {"sessionId": sid, "cwd": str(ws)})
        box["login"] = await client.request("auth/login", {"methodId": "api-key"})
        box["logout"] = await client.request("auth/logout", {})
        box["close"] = await client.request("session/close", {"sessionId": sid})
        box["delete"] = await client.request("session/delete", {"sessionId": sid})
        box["list_after"] = await client.request("session/list", {})
        box["updates"] = list(client.updates)

    run = await run_bridge(_report_script(tmp_path), tmp_path / "state", play)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    mode = next(o for o in box["new"]["configOptions"] if o["configId"] == "mode")
    assert mode["currentValue"] == "ask"
    assert "modes" not in box["new"]
    assert [s["sessionId"] for s in box["list"]["result"]["sessions"]] == [box["new"]["sessionId"]]
    options = box["mode"]["result"]["configOptions"]
    assert next(o for o in options if o["configId"] == "mode")["currentValue"] == "read_only"
    assert not any(u["sessionUpdate"] == "current_mode_update" for u in box["updates"])
    assert box["set_mode"]["error"]["code"] == -32601
    assert box["authenticate"]["error"]["code"] == -32601
    assert box["fork"]["error"]["code"] == -32601
    assert box["login"]["result"] == {}
    assert box["logout"]["result"] == {}
    assert box["close"]["result"] == {}
    assert box["delete"]["result"] == {}
    assert box["list_after"]["result"]["sessions"] == []


async def test_v2_provider_error_is_an_error_idle(tmp_path: Path) -> None:
    """A provider error ends the turn with ``idle(stopReason: error)`` and the
    JSON-RPC error v1 would have answered the prompt with (never a Stop)."""
    failing = {"message": "Overloaded", "kind": "overloaded", "status": 529, "retryable": False}
    script = write_script(tmp_path, {"responses": [{"events": [{"error": failing}]}]})
    ws = tmp_path / "ws"
    ws.mkdir()
    box: Json = {}

    async def play(client: AcpClient) -> None:
        _, box["answer"] = await _one_turn(client, V2_INIT, str(ws), "fail")
        box["idle"] = await _idle(client, 0)

    run = await run_bridge(script, tmp_path / "state", play)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    assert box["answer"]["messageId"].startswith("msg_user_")
    assert box["idle"]["stopReason"] == "error"
    assert box["idle"]["error"]["code"] == -32603
    assert "Overloaded" in box["idle"]["error"]["message"]


async def test_v2_stop_while_a_permission_waits(tmp_path: Path) -> None:
    """A Stop while the turn ``requires_action``: the call never runs, the
    turn goes straight to ``idle(cancelled)`` (no ``running`` in between),
    and nothing of it follows."""
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(
        tmp_path,
        {
            "responses": [{"events": [tool_call("call_1", "run_command", command="echo no")]}],
            "when_exhausted": "error",
        },
    )
    box: Json = {}

    async def never(params: Json) -> Json:
        await anyio.sleep_forever()
        raise AssertionError

    async def play(client: AcpClient) -> None:
        client.handlers["session/request_permission"] = never
        sid, _ = await _one_turn(client, V2_INIT, str(ws), "run it")
        await client.wait_until(lambda: "requires_action" in _states(client.updates))
        await client.notify("session/cancel", {"sessionId": sid})
        box["idle"] = await _idle(client, 0)
        await client.request("session/list", {})  # a barrier: anything late is in by now
        box["updates"] = list(client.updates)

    run = await run_bridge(script, tmp_path / "state", play)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    assert box["idle"]["stopReason"] == "cancelled"
    states = _states(box["updates"])
    assert states[-2:] == ["requires_action", "idle"]
    assert (
        box["updates"][-1] is box["idle"]
        or box["updates"].index(box["idle"]) == len(box["updates"]) - 1
    )
    assert "no\n" not in json.dumps(box["updates"])


async def test_v2_notices_are_notice_updates(tmp_path: Path) -> None:
    """v2 has ``notice`` among its updates: what a v1 client without the
    opt-in sees as a thought chunk (an MCP server that cannot start) is a
    ``notice`` on v2; no chunk without a ``messageId`` is sent."""
    ws = tmp_path / "ws"
    ws.mkdir()
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        bad = {"type": "stdio", "name": "bad", "command": str(tmp_path / "no-such-server")}
        await client.request("session/new", {"cwd": str(ws), "mcpServers": [bad]})
        await client.wait_until(lambda: any(u["sessionUpdate"] == "notice" for u in client.updates))
        box["updates"] = list(client.updates)

    run = await run_bridge(_report_script(tmp_path), tmp_path / "state", play)
    load_acp_v2_schema().check_transcript(run.client.transcript)
    notice = next(u for u in box["updates"] if u["sessionUpdate"] == "notice")
    assert "bad" in notice["title"] + notice.get("description", "")
    assert not any(u["sessionUpdate"] == "agent_thought_chunk" for u in box["updates"])


async def test_v2_plans_by_id_live_and_on_resume(tmp_path: Path) -> None:
    """v2 has plans by id with no capability to ask for: the model keeps
    several plans (steps or Markdown) and removes one; the client gets
    ``plan_update`` by ``planId`` and ``plan_removed``, never v1's whole-list
    ``plan``; a resume with replay in a new process shows each plan left, in
    its own form.  Every frame is checked against v2's unstable schema (where
    the Markdown form and ``plan_removed`` are defined)."""
    from test_plans_by_id import (
        FIRST,
        LATER,
        NOTES,
        REVIEW,
        SCRIPT,
        SECOND,
        items,
        markdown,
        plan_frames,
    )

    ws = tmp_path / "ws"
    ws.mkdir()
    state = tmp_path / "state"
    box: Json = {}

    async def play(client: AcpClient) -> None:
        box["sid"], _ = await _one_turn(client, V2_INIT, str(ws), "Fix the parser bug")
        box["idle"] = await _idle(client, 0)
        box["updates"] = list(client.updates)

    run = await run_bridge(write_script(tmp_path, SCRIPT), state, play)
    run.check_logs()
    schema = load_acp_v2_unstable_schema()
    schema.check_transcript(run.client.transcript)
    assert box["idle"]["stopReason"] == "end_turn"
    assert plan_frames(box["updates"]) == [
        items("main", FIRST),
        markdown("review", REVIEW),
        items("main", SECOND),
        {"sessionUpdate": "plan_removed", "planId": "review"},
        items("later", LATER),
        markdown("notes", NOTES),
    ]
    # Each plan frame comes before the turn's idle.
    at = box["updates"].index(box["idle"])
    assert not plan_frames(box["updates"][at:])

    async def resume(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        params = {"sessionId": box["sid"], "cwd": str(ws), "replayFrom": {"type": "start"}}
        box["resumed"] = await client.request("session/resume", params)

    again = await run_bridge(_report_script(tmp_path), state, resume)
    schema.check_transcript(again.client.transcript)
    assert "result" in box["resumed"]
    assert plan_frames(again.client.updates) == [
        items("main", SECOND),
        items("later", LATER),
        markdown("notes", NOTES),
    ]
