"""Cancelling one running tool call, or the command of one terminal, while the
turn goes on (ACP v2's ``tool_call/cancel`` and ``terminal/cancel``), and the
live output of a command the agent runs itself.

In process, the engine behind a stand-in for the v2 edge: the session runs its
commands on the local workspace (`LocalWorkspace`, as a v2 session does) and
the connection has the two cancel methods (`LiveMethods.cancel_handlers`).
The scripted model runs ``echo started; sleep 60; echo never``, then reports
what its next request held.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import report, run_bridge, tool_call, write_script

from acp_bridge.acp import tool_setup
from acp_bridge.acp.live import LiveMethods
from acp_bridge.client import AcpClient, PromptResult, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.replay import replay_updates
from acp_bridge.protocol.v2_tools import tool_update
from acp_bridge.redact import Redactor
from acp_bridge.tools import ToolContext
from acp_bridge.tools.base import ClientCapabilities
from acp_bridge.tools.command import RunCommand
from acp_bridge.tools.live_terminal import LiveTerminal
from acp_bridge.tools.local_workspace import LocalWorkspace
from acp_bridge.tools.workspace import OUTPUT_BYTE_LIMIT
from acp_bridge.update_builders import CANCELLED_META, is_cancelled

pytestmark = pytest.mark.anyio

Json = dict[str, Any]
COMMAND = "echo started; sleep 60; echo never"
REPORT = {"events": [{"report": ["message_count", "tool_results"]}]}
SCRIPT = {
    "responses": [{"events": [tool_call("call_1", "run_command", command=COMMAND)]}, REPORT],
    "when_exhausted": "error",
}


@pytest.fixture
def v2_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine as a v2 connection has it: local commands, the cancel methods."""
    monkeypatch.setattr(tool_setup, "choose", lambda capabilities: LocalWorkspace())
    handlers = LiveMethods.handlers
    monkeypatch.setattr(
        LiveMethods, "handlers", lambda self: {**handlers(self), **self.cancel_handlers()}
    )


async def _allow(params: Json) -> Json:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def _shown(client: AcpClient, terminal_id: str) -> str:
    """What the terminal's live output chunks showed."""
    return "".join(
        base64.b64decode(u["data"]).decode()
        for u in client.updates
        if u["sessionUpdate"] == "terminal_output_chunk" and u["terminalId"] == terminal_id
    )


def _terminal_id(client: AcpClient) -> str | None:
    for u in client.updates:
        if u["sessionUpdate"] == "terminal_update" and u.get("command") == COMMAND:
            return str(u["terminalId"])
    return None


async def _play(
    tmp_path: Path, cancel: str, script: Json = SCRIPT
) -> tuple[Json, Json, list[Json], AcpClient]:
    """Prompt; once the command printed ``started``, send ``cancel`` for it
    (``tool_call/cancel`` or ``terminal/cancel``, or ``session/cancel``: a
    Stop); then cancel it again (late)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    box: Json = {}

    async def play(client: AcpClient) -> None:
        client.handlers["session/request_permission"] = _allow
        await client.initialize()
        sid = box["sid"] = await client.new_session(str(ws))

        async def prompt() -> None:
            box["prompt"] = await client.request("session/prompt", prompt_params(sid, "Run it"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            await client.wait_until(
                lambda: (t := _terminal_id(client)) is not None and "started" in _shown(client, t)
            )
            terminal_id = _terminal_id(client)
            assert terminal_id is not None
            if cancel == "session/cancel":
                await client.notify(cancel, {"sessionId": sid})
                return
            if cancel == "tool_call/cancel":
                params = {"sessionId": sid, "toolCallId": "call_1"}
            else:
                params = {"sessionId": sid, "terminalId": terminal_id}
            box["cancel"] = await client.request(cancel, params)
        box["late"] = await client.request(cancel, params)

    run = await run_bridge(
        write_script(tmp_path, script), tmp_path / "state", play, mode="inprocess"
    )
    records = run.logs()[box["sid"]]
    check_log(records)
    return box, box["prompt"], records, run.client


def _facts(response: Json, client: AcpClient) -> Json:
    return report(PromptResult(response, list(client.updates), []))


def _final_update(client: AcpClient) -> Json:
    (final,) = [
        u
        for u in client.updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]
    return final


async def test_a_cancelled_tool_call_ends_with_its_partial_output_and_the_turn_goes_on(
    tmp_path: Path, v2_engine: None
) -> None:
    box, response, records, client = await _play(tmp_path, "tool_call/cancel")
    assert box["cancel"]["result"] == {}
    # The turn was not stopped: the model's next request holds the result.
    assert response["result"] == {"stopReason": "end_turn"}
    (result,) = _facts(response, client)["tool_results"]
    assert result["tool_call_id"] == "call_1"
    assert result["text"].startswith(f"$ {COMMAND}\nstarted\n")
    assert "cancelled by the user (the turn went on)" in result["text"]
    assert "never" not in result["text"].split("\n", 1)[1]
    assert result["is_error"]
    # Its final update says it was cancelled (v2 shows that status), with the output.
    final = _final_update(client)
    assert final["status"] == "failed"
    assert is_cancelled(final)
    assert "started" in final["content"][-1]["content"]["text"]
    # Logged like any result: a load shows the same update, the history the same text.
    (logged,) = [r for r in records if r["type"] == "tool/result"]
    assert "cancelled by the user" in logged["content"][0]["text"]
    replayed = [p["update"] for p in replay_updates(records)]
    assert any(is_cancelled(u) for u in replayed if u["sessionUpdate"] == "tool_call_update")
    assert "cancelled by the user" in str(derive_messages(records))
    # The terminal showed its exit: killed, no cancel any more.
    exits = [
        u for u in client.updates if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u
    ]
    assert [e["exitStatus"]["signal"] for e in exits] == ["SIGKILL"]
    assert exits[0]["capabilities"] is None
    # A late cancel: the call has finished.
    assert box["late"]["error"]["code"] == -32602
    assert "has already finished" in box["late"]["error"]["message"]


async def test_a_cancelled_terminal_kills_its_command_and_the_call_ends_with_what_it_printed(
    tmp_path: Path, v2_engine: None
) -> None:
    box, response, _records, client = await _play(tmp_path, "terminal/cancel")
    assert box["cancel"]["result"] == {}
    assert response["result"] == {"stopReason": "end_turn"}
    (result,) = _facts(response, client)["tool_results"]
    assert result["text"].startswith(f"$ {COMMAND}\nstarted\n")
    assert "cancelled by the user (the turn went on): the command was killed" in result["text"]
    # The terminal's cancel does not make the call cancelled: it ends with its result.
    final = _final_update(client)
    assert final["status"] == "failed"
    assert not is_cancelled(final)
    assert box["late"]["error"]["code"] == -32602
    assert box["late"]["error"]["data"]["field"] == "terminalId"
    assert "is running" in box["late"]["error"]["message"]


# -- the live output of a local command (the workspace and its LiveTerminal) -------------


async def _unused(method: str, params: Json) -> Any:
    raise AssertionError(f"no editor request expected: {method}")


async def _run_live(ws: Path, command: str, redactor: Redactor) -> tuple[Any, list[Json]]:
    shown: list[Json] = []
    ctx = ToolContext(
        session_id="s",
        cwd=str(ws),
        roots=[str(ws)],
        capabilities=ClientCapabilities(),
        call_id="c",
        request=_unused,
        settle=_unused,
        cleanup=_unused,
        update=lambda fields: None,
        stopped=lambda: False,
        workspace=LocalWorkspace(),
        max_output=10**7,
        live=LiveTerminal(shown.append, redactor),
    )
    tool = RunCommand()
    out = await tool.run(tool.args_model.model_validate({"command": command}), ctx)
    return out, shown


def _chunks(shown: list[Json]) -> list[bytes]:
    return [
        base64.b64decode(u["data"]) for u in shown if u["sessionUpdate"] == "terminal_output_chunk"
    ]


async def test_a_local_command_is_shown_live_line_by_line_with_secrets_blanked(
    tmp_path: Path,
) -> None:
    """A secret is never shown, not even split across two reads of the pipe."""
    secret = "hunter2-hunter2-hunter2"
    command = f"printf 'one {secret[:9]}'; sleep 0.2; printf '{secret[9:]} two\\nlast'; exit 4"
    out, shown = await _run_live(tmp_path, command, Redactor([secret]))
    start, *_, end = shown
    assert start["sessionUpdate"] == "terminal_update"
    assert start["command"] == command  # no whole secret in it
    assert start["cwd"] == str(tmp_path)
    assert start["capabilities"] == {"cancel": {}}
    text = b"".join(_chunks(shown)).decode()
    assert text == "one [redacted] two\nlast"
    assert secret[9:] not in text
    assert secret[:9] not in text
    assert end == {
        "sessionUpdate": "terminal_update",
        "terminalId": start["terminalId"],
        "exitStatus": {"exitCode": 4, "signal": None},
        "capabilities": None,
    }
    assert out.content == [{"type": "terminal", "terminalId": start["terminalId"]}]


async def test_live_output_stops_at_the_terminal_limit_and_the_exit_shows_the_last_bytes(
    tmp_path: Path,
) -> None:
    lines = OUTPUT_BYTE_LIMIT // 10 + 100
    command = f"seq -w 1 {lines} | sed 's/^/line /'"
    _out, shown = await _run_live(tmp_path, command, Redactor())
    chunks = _chunks(shown)
    assert sum(map(len, chunks)) <= OUTPUT_BYTE_LIMIT
    assert b"".join(chunks).startswith(b"line 00001\n")
    end = shown[-1]
    snapshot = base64.b64decode(end["output"]["data"])
    assert len(snapshot) == OUTPUT_BYTE_LIMIT
    assert snapshot.endswith(f"line {lines}\n".encode())
    assert end["exitStatus"] == {"exitCode": 0, "signal": None}


def test_v2_shows_a_running_call_cancellable_and_a_cancelled_one_cancelled() -> None:
    running = {"toolCallId": "c", "status": "in_progress"}
    assert tool_update(running) == {**running, "capabilities": {"cancel": {}}}
    pending = {"toolCallId": "c", "status": "pending", "title": "Run"}
    assert tool_update(pending) is pending
    done = {"toolCallId": "c", "status": "failed", "content": []}
    assert tool_update(done) == {**done, "capabilities": None}
    cancelled = {**done, "_meta": {**CANCELLED_META, "other": 1}}
    assert tool_update(cancelled) == {
        "toolCallId": "c",
        "status": "cancelled",
        "content": [],
        "capabilities": None,
        "_meta": {"other": 1},
    }
    assert "_meta" not in tool_update({**done, "_meta": CANCELLED_META})


async def test_a_stop_while_a_local_command_runs_is_still_a_stop(
    tmp_path: Path, v2_engine: None
) -> None:
    """The cancel of one call does not blur a Stop: the turn ends cancelled, the
    result says the user interrupted it, and no update is marked cancelled."""
    script = {**SCRIPT, "responses": [SCRIPT["responses"][0], REPORT, REPORT]}
    _box, response, records, client = await _play(tmp_path, "session/cancel", script)
    assert response["result"] == {"stopReason": "cancelled"}
    final = _final_update(client)
    assert not is_cancelled(final)
    (logged,) = [r for r in records if r["type"] == "tool/result"]
    assert "interrupted by the user: the command was killed" in logged["content"][0]["text"]
    assert "started" in logged["content"][0]["text"]


async def test_a_call_waiting_for_permission_or_unknown_cannot_be_cancelled_alone(
    tmp_path: Path, v2_engine: None
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    box: Json = {}
    asked = anyio.Event()
    answer = anyio.Event()

    async def hold(params: Json) -> Json:
        asked.set()
        await answer.wait()
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    async def play(client: AcpClient) -> None:
        client.handlers["session/request_permission"] = hold
        await client.initialize()
        sid = await client.new_session(str(ws))
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.request, "session/prompt", prompt_params(sid, "Run it"))
            await asked.wait()
            for call_id in ("call_1", "call_9"):
                params = {"sessionId": sid, "toolCallId": call_id}
                box[call_id] = await client.request("tool_call/cancel", params)
            box["terminal"] = await client.request(
                "terminal/cancel", {"sessionId": sid, "terminalId": "term_x"}
            )
            answer.set()

    await run_bridge(write_script(tmp_path, SCRIPT), tmp_path / "state", play, mode="inprocess")
    assert box["call_1"]["error"]["code"] == -32602
    assert "is not running yet" in box["call_1"]["error"]["message"]
    assert box["call_9"]["error"]["data"]["field"] == "toolCallId"
    assert "no tool call call_9 is running" in box["call_9"]["error"]["message"]
    assert "no terminal term_x is running" in box["terminal"]["error"]["message"]
