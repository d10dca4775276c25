"""Subagent sessions over ACP v2, through the real bridge (tests/test_subagents.py
is v1's).

v2 requires no capability for subagents (its schema: understanding
``subagent_update`` is a "baseline v2 requirement. No Client capability is
required"), so every v2 client sees the child: a ``subagent_update`` on the
parent before any of the child's traffic, the hand-over and the answer as
``session_message``, and the child's updates, ``state_update`` among them,
under its own ``sessionId``.  A Stop of the parent stops the child first: the
child's ``idle(cancelled)``, then the parent's, with nothing of either
session after it.  The client may cancel the child alone (``session/cancel``
with its id) and cancel one of its tool calls or terminals
(``tool_call/cancel``, ``terminal/cancel`` with its id).  Every frame is
checked against v2's unstable schema, where these shapes are defined.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_acp_v2_unstable_schema
from harness import run_bridge, tool_call, write_script
from support.harness import Run
from test_subagents import CHILD_ANSWERS, answered

from acp_bridge.client import AcpClient, prompt_params
from acp_bridge.providers.scripted import parse_report

pytestmark = pytest.mark.anyio

Json = dict[str, Any]
V2_INIT = {"protocolVersion": 2, "info": {"name": "v2-test", "version": "1"}, "capabilities": {}}
ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def updates(client: AcpClient) -> list[tuple[str, Json]]:
    """Every ``session/update`` the bridge wrote, as (session id, update)."""
    return [
        (m["params"]["sessionId"], m["params"]["update"])
        for d, m in client.transcript
        if d == "recv" and isinstance(m, dict) and m.get("method") == "session/update"
    ]


def of(client: AcpClient, sid: str) -> list[Json]:
    return [u for s, u in updates(client) if s == sid]


def states(client: AcpClient, sid: str) -> list[str]:
    return [u["state"] for u in of(client, sid) if u["sessionUpdate"] == "state_update"]


def idle(client: AcpClient, sid: str) -> Json | None:
    found = [u for u in of(client, sid) if u.get("state") == "idle"]
    return found[0] if found else None


def child_of(client: AcpClient, sid: str) -> str | None:
    """The child the parent ``sid`` announced, once it has."""
    for s, u in updates(client):
        if s == sid and u["sessionUpdate"] == "subagent_update":
            return str(u["sessionId"])
    return None


def text(client: AcpClient, sid: str) -> str:
    return "".join(
        u["content"]["text"] for u in of(client, sid) if u["sessionUpdate"] == "agent_message_chunk"
    )


def terminal_output(client: AcpClient, sid: str) -> str:
    return "".join(
        base64.b64decode(u["data"]).decode()
        for u in of(client, sid)
        if u["sessionUpdate"] == "terminal_output_chunk"
    )


async def session(
    tmp_path: Path,
    script: Json,
    *,
    permission: str = "allow",
    act: Any = None,
) -> tuple[str, str, Run]:
    """One v2 prompt whose model calls ``task``; ``act(client, parent)`` runs
    once the prompt is answered (it may wait for something and press Stop);
    then the parent's ``idle`` is awaited and a barrier request taken, so
    anything sent late would be in the transcript.  The parent's and the
    child's ids, and the run, its logs and every frame checked."""
    box: Json = {}
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)

    async def ask(params: Json) -> Json:
        if permission == "hang":
            await anyio.sleep_forever()
        return ALLOW

    async def play(client: AcpClient) -> None:
        client.handlers["session/request_permission"] = ask
        await client.request("initialize", V2_INIT)
        sid = box["sid"] = (await client.request("session/new", {"cwd": str(ws)}))["result"][
            "sessionId"
        ]
        answer = await client.request("session/prompt", prompt_params(sid, "Count them"))
        assert "messageId" in answer["result"]
        if act is not None:
            await act(client, sid)
        await client.wait_until(lambda: idle(client, sid) is not None, within=20)
        await client.request("session/list", {})  # a barrier: anything late is in by now

    run = await run_bridge(write_script(tmp_path, script), tmp_path / "state", play)
    run.check_logs()
    load_acp_v2_unstable_schema().check_transcript(run.client.transcript)
    sid = box["sid"]
    child = child_of(run.client, sid)
    assert child is not None
    return sid, child, run


def last_is_the_parents_idle(client: AcpClient, sid: str) -> Json:
    """The Stop contract: the parent's ``idle`` is the last update of any session."""
    found = idle(client, sid)
    assert found is not None
    assert updates(client)[-1] == (sid, found)
    return found


async def test_the_child_is_shown_in_v2_shapes(tmp_path: Path) -> None:
    sid, child, run = await session(tmp_path, answered(CHILD_ANSWERS))
    client = run.client
    assert idle(client, sid) == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    order = updates(client)
    announce = next(i for i, (s, u) in enumerate(order) if u["sessionUpdate"] == "subagent_update")
    assert order[announce][0] == sid
    assert order[announce][1]["capabilities"] == {"cancel": {}}
    assert announce < min(i for i, (s, _) in enumerate(order) if s == child)
    mine = of(client, child)
    assert mine[0]["sessionUpdate"] == "session_message"  # the hand-over first
    assert mine[0]["content"] == [{"type": "text", "text": "How many files?"}]
    assert mine[0]["recipientSessionId"] == child
    # The child's turn in v2's terms, its chunks under one message id.
    assert states(client, child) == ["running", "idle"]
    assert mine[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    chunks = [u for u in mine if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in chunks) == "There are 3 files."
    assert len({u["messageId"] for u in chunks}) == 1
    # The answer comes back to the parent after the child's idle, and is the call's result.
    (back,) = [u for u in of(client, sid) if u["sessionUpdate"] == "session_message"]
    assert back["senderSessionId"] == child
    assert order.index((sid, back)) > order.index((child, mine[-1]))
    (seen,) = parse_report(text(client, sid))["tool_results"]
    assert seen["text"] == "There are 3 files."
    last_is_the_parents_idle(client, sid)


def stopped_first(run: Run, sid: str, child: str) -> list[Json]:
    """Child, then parent, ``idle(cancelled)``, nothing after; the child's log."""
    client = run.client
    child_idle, parent_idle = idle(client, child), last_is_the_parents_idle(client, sid)
    assert child_idle is not None
    assert child_idle["stopReason"] == parent_idle["stopReason"] == "cancelled"
    order = updates(client)
    assert order.index((child, child_idle)) < order.index((sid, parent_idle))
    logs = run.logs()
    assert [r["reason"] for r in logs[child] if r["type"] == "turn/end"] == ["cancelled"]
    assert [r["reason"] for r in logs[sid] if r["type"] == "turn/end"] == ["cancelled"]
    return logs[child]


async def test_a_stop_while_the_child_streams_stops_it_first(tmp_path: Path) -> None:
    streaming = [{"events": [{"text": "Counting so far: one, two"}, {"hang": True}]}]

    async def stop(client: AcpClient, sid: str) -> None:
        await client.wait_until(lambda: "Counting so far" in str(client.transcript), within=10)
        await client.notify("session/cancel", {"sessionId": sid})

    sid, child, run = await session(tmp_path, answered(streaming), act=stop)
    child_log = stopped_first(run, sid, child)
    (said,) = [r for r in child_log if r["type"] == "assistant/message"]
    assert said.get("interrupted") is True
    assert said["content"][0]["text"] == text(run.client, child)
    (res,) = [r for r in run.logs()[sid] if r["type"] == "tool/result"]
    assert text(run.client, child) in res["content"][0]["text"]


async def test_a_stop_while_the_child_waits_for_a_permission(tmp_path: Path) -> None:
    edit = tool_call("c_edit", "write_file", path=str(tmp_path / "ws" / "a.txt"), content="x")
    waits = [{"events": [edit]}, {"events": [{"text": "never"}]}]

    async def stop(client: AcpClient, sid: str) -> None:
        await client.wait_until(
            lambda: "session/request_permission" in str(client.transcript), within=10
        )
        await client.notify("session/cancel", {"sessionId": sid})

    sid, child, run = await session(tmp_path, answered(waits), permission="hang", act=stop)
    stopped_first(run, sid, child)
    (asked,) = [
        m for d, m in run.client.transcript if m.get("method") == "session/request_permission"
    ]
    # The request names the child, whose turn requires_action, then idles.
    assert asked["params"]["sessionId"] == child
    assert asked["params"]["subject"]["toolCall"]["toolCallId"] == "c_edit"
    assert states(run.client, child) == ["running", "requires_action", "idle"]
    assert not (tmp_path / "ws" / "a.txt").exists()


COMMAND = tool_call("c_cmd", "run_command", command="echo begun; sleep 30")


async def test_a_stop_while_the_child_runs_a_command(tmp_path: Path) -> None:
    running = [{"events": [COMMAND]}, {"events": [{"text": "never"}]}]

    async def stop(client: AcpClient, sid: str) -> None:
        await client.wait_until(
            lambda: "begun" in terminal_output(client, child_of(client, sid) or ""), within=10
        )
        await client.notify("session/cancel", {"sessionId": sid})

    sid, child, run = await session(tmp_path, answered(running), act=stop)
    child_log = stopped_first(run, sid, child)
    (res,) = [r for r in child_log if r["type"] == "tool/result"]
    assert "begun" in res["content"][0]["text"]  # the command's real partial output
    exits = [u for u in of(run.client, child) if u.get("exitStatus") is not None]
    assert exits, "the child's terminal reported its exit before the child's idle"


async def test_a_child_cancelled_alone_leaves_the_parent_running(tmp_path: Path) -> None:
    streaming = [{"events": [{"text": "Counting so far: one"}, {"hang": True}]}]

    async def cancel_child(client: AcpClient, sid: str) -> None:
        await client.wait_until(lambda: "Counting so far" in str(client.transcript), within=10)
        await client.notify("session/cancel", {"sessionId": child_of(client, sid)})

    sid, child, run = await session(tmp_path, answered(streaming), act=cancel_child)
    client = run.client
    child_idle, parent_idle = idle(client, child), last_is_the_parents_idle(client, sid)
    assert child_idle is not None
    assert child_idle["stopReason"] == "cancelled"
    assert parent_idle["stopReason"] == "end_turn"  # the parent went on
    (seen,) = parse_report(text(client, sid))["tool_results"]
    assert seen["text"] == "The subagent was stopped. What it had said:\nCounting so far: one"


def _running_call(client: AcpClient, sid: str, call: str) -> bool:
    return any(
        u.get("toolCallId") == call and u.get("status") == "in_progress" for u in of(client, sid)
    )


async def test_a_childs_tool_call_is_cancelled_under_its_own_id(tmp_path: Path) -> None:
    """``tool_call/cancel`` naming the child's session stops that call only:
    the child goes on to its next answer, and so does the parent."""
    script = answered([{"events": [COMMAND]}, {"events": [{"text": "Gave up on it."}]}])
    box: Json = {}

    async def cancel_call(client: AcpClient, sid: str) -> None:
        await client.wait_until(
            lambda: "begun" in terminal_output(client, child_of(client, sid) or ""), within=10
        )
        child = child_of(client, sid)
        assert child is not None
        assert _running_call(client, child, "c_cmd")
        params = {"sessionId": child, "toolCallId": "c_cmd"}
        box["answer"] = await client.request("tool_call/cancel", params)

    sid, child, run = await session(tmp_path, script, act=cancel_call)
    client = run.client
    assert box["answer"] == {"jsonrpc": "2.0", "id": box["answer"]["id"], "result": {}}
    final = [u for u in of(client, child) if u.get("toolCallId") == "c_cmd" and u.get("status")]
    assert final[-1]["status"] == "cancelled"
    assert idle(client, child) == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }
    assert text(client, child) == "Gave up on it."
    assert last_is_the_parents_idle(client, sid)["stopReason"] == "end_turn"


async def test_a_childs_terminal_is_cancelled_under_its_own_id(tmp_path: Path) -> None:
    script = answered([{"events": [COMMAND]}, {"events": [{"text": "It was killed."}]}])
    box: Json = {}

    async def cancel_terminal(client: AcpClient, sid: str) -> None:
        await client.wait_until(
            lambda: "begun" in terminal_output(client, child_of(client, sid) or ""), within=10
        )
        child = child_of(client, sid)
        assert child is not None
        (terminal,) = {
            u["terminalId"] for u in of(client, child) if u["sessionUpdate"] == "terminal_update"
        }
        params = {"sessionId": child, "terminalId": terminal}
        box["answer"] = await client.request("terminal/cancel", params)

    sid, child, run = await session(tmp_path, script, act=cancel_terminal)
    client = run.client
    assert box["answer"]["result"] == {}
    assert text(client, child) == "It was killed."
    assert last_is_the_parents_idle(client, sid)["stopReason"] == "end_turn"
    (res,) = [r for r in run.logs()[child] if r["type"] == "tool/result"]
    assert "begun" in res["content"][0]["text"]


async def test_resuming_the_parent_replays_its_children(tmp_path: Path) -> None:
    sid, child, _ = await session(tmp_path, answered(CHILD_ANSWERS))
    box: Json = {}

    async def resume(client: AcpClient) -> None:
        await client.request("initialize", V2_INIT)
        params = {"sessionId": sid, "cwd": str(tmp_path / "ws"), "replayFrom": {"type": "start"}}
        box["resumed"] = await client.request("session/resume", params)

    again = await run_bridge(
        write_script(tmp_path, {"responses": [{"events": [{"text": "resumed"}]}]}),
        tmp_path / "state",
        resume,
    )
    load_acp_v2_unstable_schema().check_transcript(again.client.transcript)
    assert "result" in box["resumed"]
    replayed = of(again.client, sid)
    kinds = [u["sessionUpdate"] for u in replayed]
    announce = kinds.index("subagent_update")
    assert replayed[announce]["sessionId"] == child
    assert replayed[announce]["title"] == "Count the files"
    (back,) = [u for u in replayed if u["sessionUpdate"] == "session_message"]
    assert kinds.index("session_message") > announce
    assert back["content"] == [{"type": "text", "text": "There are 3 files."}]


async def test_cancelling_the_task_call_stops_the_child_and_the_parent_goes_on(
    tmp_path: Path,
) -> None:
    """``tool_call/cancel`` of the parent's ``task`` call: the child stops first
    (its ``idle(cancelled)``), the call ends ``cancelled`` with what the child
    had said, and the parent's turn goes on to its own end."""
    streaming = [{"events": [{"text": "Counting so far: one"}, {"hang": True}]}]
    box: Json = {}

    async def cancel_task(client: AcpClient, sid: str) -> None:
        await client.wait_until(lambda: "Counting so far" in str(client.transcript), within=10)
        assert _running_call(client, sid, "call_1")
        params = {"sessionId": sid, "toolCallId": "call_1"}
        box["answer"] = await client.request("tool_call/cancel", params)

    sid, child, run = await session(tmp_path, answered(streaming), act=cancel_task)
    client = run.client
    assert box["answer"]["result"] == {}
    child_idle = idle(client, child)
    assert child_idle is not None
    assert child_idle["stopReason"] == "cancelled"
    final = [u for u in of(client, sid) if u.get("toolCallId") == "call_1" and u.get("status")]
    assert final[-1]["status"] == "cancelled"
    order = updates(client)
    assert order.index((child, child_idle)) < order.index((sid, final[-1]))
    (seen,) = parse_report(text(client, sid))["tool_results"]
    assert "Counting so far: one" in seen["text"]
    assert last_is_the_parents_idle(client, sid)["stopReason"] == "end_turn"
