"""``ask_user`` through the real subprocess and a test editor that answers
``elicitation/create``: accept, decline, dismiss (cancel) and a Stop while the
question is open each become the tool's result; the tool is offered only to
a client that advertised ``elicitation.form``; the call is replayed on load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_pinned_sdk_schema
from harness import SessionSnapshot, normalize, report, run_bridge, tool_call, write_script
from support.bridge import Mode
from syrupy.assertion import SnapshotAssertion

from acp_bridge.acp.tool_setup import registry_for
from acp_bridge.client import AcpClient, PromptResult
from acp_bridge.tools.ask_user import DECLINED, DISMISSED, STOPPED
from acp_bridge.tools.base import ClientCapabilities

pytestmark = pytest.mark.anyio

FORMS = {"fs": {"readTextFile": False, "writeTextFile": False}, "elicitation": {"form": {}}}
NO_FORMS = {"fs": {"readTextFile": False, "writeTextFile": False}}
ASK = tool_call("call_1", "ask_user", question="Which database?", choices=["sqlite", "postgres"])
REPORT = {"events": [{"report": ["tool_results"]}]}


def script() -> dict[str, Any]:
    return {"responses": [{"events": [ASK]}, REPORT], "when_exhausted": "repeat_last"}


async def ask(
    tmp_path: Path,
    answer: dict[str, Any] | None,
    *,
    stop: bool = False,
    mode: Mode = "inprocess",
) -> tuple[PromptResult, list[dict[str, Any]], Any]:
    """One prompt whose model asks; the editor answers ``answer`` (or, with
    ``stop``, never: the user presses Stop while the question is open).  The
    bridge is served in this process unless ``mode`` says otherwise."""
    asked: list[dict[str, Any]] = []
    box: dict[str, Any] = {}
    open_now = anyio.Event()

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        open_now.set()
        if stop:
            await anyio.sleep_forever()
        assert answer is not None
        return answer

    async def play(client: AcpClient) -> None:
        client.handlers["elicitation/create"] = elicit
        await client.initialize(FORMS)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        if not stop:
            box["result"] = await client.prompt(sid, "Set up the storage")
            return
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                box["result"] = await client.prompt(sid, "Set up the storage")

            tg.start_soon(run)
            await open_now.wait()
            await client.notify("session/cancel", {"sessionId": sid})

    run = await run_bridge(write_script(tmp_path, script()), tmp_path / "state", play, mode=mode)
    run.check_logs()
    schema = load_pinned_sdk_schema()
    assert schema is not None
    schema.check_transcript(run.client.transcript)
    return box["result"], asked, run


def the_result(run: Any) -> dict[str, Any]:
    (records,) = run.logs().values()
    (result,) = [r for r in records if r["type"] == "tool/result"]
    return dict(result)


async def test_accept_is_the_answer(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    answer = {"action": "accept", "content": {"choice": "postgres", "answer": "version 16"}}
    result, asked, run = await ask(tmp_path, answer)
    (params,) = asked
    assert params["mode"] == "form"
    assert params["message"] == "Which database?"
    assert params["toolCallId"] == "call_1"
    choice = params["requestedSchema"]["properties"]["choice"]
    assert [o["const"] for o in choice["oneOf"]] == ["sqlite", "postgres"]
    (seen,) = report(result)["tool_results"]
    assert seen["text"] == "The user answered: chose 'postgres'; and wrote: version 16"
    assert the_result(run)["is_error"] is False
    wire = normalize(
        [list(entry) for entry in run.client.transcript], paths={str(tmp_path): "<tmp>"}
    )
    assert wire == snapshot.use_extension(SessionSnapshot)


@pytest.mark.parametrize(
    ("action", "text"), [("decline", DECLINED), ("cancel", DISMISSED)], ids=["decline", "dismiss"]
)
async def test_decline_and_dismiss_are_answers_too(tmp_path: Path, action: str, text: str) -> None:
    result, asked, _ = await ask(tmp_path, {"action": action})
    assert len(asked) == 1
    (seen,) = report(result)["tool_results"]
    assert seen["text"] == text
    assert "do not ask" in text.lower()
    assert result.stop_reason == "end_turn"


async def test_a_stop_while_the_question_is_open_cancels_it(tmp_path: Path) -> None:
    result, asked, run = await ask(tmp_path, None, stop=True)
    assert len(asked) == 1
    assert result.stop_reason == "cancelled"
    # The open request was cancelled ($/cancel_request), and the call has its result.
    cancels = [m for d, m in run.client.transcript if m.get("method") == "$/cancel_request"]
    assert len(cancels) == 1
    stored = the_result(run)
    assert stored["content"] == [{"type": "text", "text": STOPPED}]
    assert stored["is_error"] is True


async def test_not_offered_without_form_elicitation(tmp_path: Path) -> None:
    asked: list[Any] = []
    box: dict[str, Any] = {}

    async def elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "cancel"}

    async def play(client: AcpClient) -> None:
        client.handlers["elicitation/create"] = elicit
        await client.initialize(NO_FORMS)
        sid = await client.new_session(str(tmp_path))
        box["result"] = await client.prompt(sid, "Set up the storage")

    await run_bridge(write_script(tmp_path, script()), tmp_path / "state", play)
    (seen,) = report(box["result"])["tool_results"]
    assert "ask_user" in seen["text"]
    assert seen["is_error"] is True
    assert asked == []  # never called when the client did not advertise it
    assert registry_for(ClientCapabilities()).get("ask_user") is None
    assert registry_for(ClientCapabilities(elicitation_form=True)).get("ask_user") is not None
    forms = ClientCapabilities.from_initialize({"elicitation": {"form": {}}})
    assert forms.elicitation_form is True
    assert (
        ClientCapabilities.from_initialize({"elicitation": {"url": {}}}).elicitation_form is False
    )


async def test_the_question_is_replayed_as_a_tool_call(tmp_path: Path) -> None:
    answer = {"action": "accept", "content": {"choice": "sqlite"}}
    # Through the real command: a later bridge opens this session again.
    _, _, run = await ask(tmp_path, answer, mode="subprocess")
    (sid,) = run.logs()

    async def load(client: AcpClient) -> None:
        await client.initialize(FORMS)
        response = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert "result" in response

    again = await run_bridge(
        write_script(tmp_path, script()), tmp_path / "state", load, mode="inprocess"
    )
    calls = [u for u in again.client.updates if u.get("toolCallId") == "call_1"]
    assert calls[0]["sessionUpdate"] == "tool_call"
    assert calls[-1]["status"] == "completed"
    assert "The user answered: chose 'sqlite'" in str(calls[-1]["content"])
