"""Subagent sessions through the real bridge: the ``task`` tool hands a task to
a child session (its own log, linked both ways), whose answer is the call's
result; the child's model responses are in the parent's script.  Every frame
is checked against the unstable ACP schema (``subagent_update``,
``session_message``); a client without ``clientCapabilities.subagents`` sees
only the parent's tool call; a Stop of the parent stops the child first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_acp_unstable_schema
from harness import report, run_bridge, tool_call, write_script
from support.bridge import Mode

from acp_bridge.client import AcpClient, PromptResult

pytestmark = pytest.mark.anyio

NO_FS = {"fs": {"readTextFile": False, "writeTextFile": False}}
EXPOSED = {**NO_FS, "subagents": {}}
TASK = tool_call("call_1", "task", description="Count the files", prompt="How many files?")
REPORT = {"events": [{"report": ["tool_results"]}]}


def frames(run: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every frame the bridge wrote, with the direction as the transcript names it."""
    return [(str(d), m) for d, m in run.client.transcript]


def updates_of(run: Any, sid: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for d, m in frames(run)
        if m.get("method") == "session/update" and m["params"]["sessionId"] == sid
    ]


def logs_by_role(run: Any, parent: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    logs = run.logs()
    (child,) = [sid for sid in logs if sid != parent]
    return logs[parent], logs[child]


async def session(
    tmp_path: Path,
    script: dict[str, Any],
    caps: dict[str, Any],
    *,
    stop_when: str | None = None,
    mode: Mode = "subprocess",
) -> tuple[PromptResult, str, Any]:
    """One prompt whose model calls ``task``; with ``stop_when``, the user
    presses Stop once a frame holding that text reached the editor."""
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(caps)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        if stop_when is None:
            box["result"] = await client.prompt(sid, "Count them")
            return
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                box["result"] = await client.prompt(sid, "Count them")

            tg.start_soon(run)
            await client.wait_until(
                lambda: any(stop_when in str(m) for _, m in client.transcript), within=10
            )
            await client.notify("session/cancel", {"sessionId": sid})

    run = await run_bridge(write_script(tmp_path, script), tmp_path / "state", play, mode=mode)
    run.check_logs()
    load_acp_unstable_schema().check_transcript(run.client.transcript)
    return box["result"], box["sid"], run


def answered(script_child: list[dict[str, Any]]) -> dict[str, Any]:
    return {"responses": [{"events": [TASK]}, *script_child, REPORT]}


CHILD_ANSWERS = [{"events": [{"text": "There are 3 files."}]}]


async def test_the_childs_answer_is_the_tool_result(tmp_path: Path) -> None:
    result, sid, run = await session(tmp_path, answered(CHILD_ANSWERS), NO_FS)
    assert result.stop_reason == "end_turn"
    (seen,) = report(result)["tool_results"]
    assert seen["text"] == "There are 3 files."
    parent, child = logs_by_role(run, sid)
    # Linked both ways: the child names its owner, the parent's call names the child.
    start = child[0]
    assert start["type"] == "session/start"
    assert start["owner"] == {"session_id": sid, "tool_call": "call_1"}
    links = [
        r["update"]["rawOutput"]["subagentSessionId"]
        for r in parent
        if r["type"] == "tool/update" and isinstance(r["update"].get("rawOutput"), dict)
    ]
    assert links
    assert set(links) == {start["session_id"]}
    # The child's own context: its history is its task and its answer only.
    users = [r for r in child if r["type"] == "user/message"]
    assert [b["text"] for b in users[0]["content"]] == ["How many files?"]
    (answer,) = [r for r in child if r["type"] == "assistant/message"]
    assert answer["content"][0]["text"] == "There are 3 files."


async def test_a_client_without_the_capability_sees_only_the_parent(tmp_path: Path) -> None:
    _, sid, run = await session(tmp_path, answered(CHILD_ANSWERS), NO_FS)
    sids = {m["params"]["sessionId"] for _, m in frames(run) if m.get("method") == "session/update"}
    assert sids == {sid}
    kinds = {u["sessionUpdate"] for u in updates_of(run, sid)}
    assert not kinds & {"subagent_update", "session_message", "session_message_chunk"}
    progress = [
        u
        for u in updates_of(run, sid)
        if u["sessionUpdate"] == "tool_call_update"
        and u.get("status") == "in_progress"
        and u.get("content")
    ]
    assert progress, "the parent's tool call shows the subagent at work"


async def test_an_opted_in_client_is_told_of_the_child_first(tmp_path: Path) -> None:
    _, sid, run = await session(tmp_path, answered(CHILD_ANSWERS), EXPOSED)
    (child,) = [s for s in run.logs() if s != sid]
    order = [
        (m["params"]["sessionId"], m["params"]["update"])
        for _, m in frames(run)
        if m.get("method") == "session/update"
    ]
    first_child = next(i for i, (s, _) in enumerate(order) if s == child)
    (announce,) = [i for i, (s, u) in enumerate(order) if u["sessionUpdate"] == "subagent_update"]
    assert order[announce][0] == sid
    assert order[announce][1]["sessionId"] == child
    assert announce < first_child
    handed = order[first_child][1]
    assert handed["sessionUpdate"] == "session_message"
    assert handed["senderSessionId"] == sid
    assert handed["content"] == [{"type": "text", "text": "How many files?"}]
    chunks = "".join(
        u["content"]["text"]
        for s, u in order
        if s == child and u["sessionUpdate"] == "agent_message_chunk"
    )
    assert chunks == "There are 3 files."
    (back,) = [u for s, u in order if s == sid and u["sessionUpdate"] == "session_message"]
    assert back["senderSessionId"] == child
    assert back["recipientSessionId"] == sid
    assert back["content"][0]["text"] == "There are 3 files."


@pytest.mark.parametrize("caps", [NO_FS, EXPOSED], ids=["hidden", "exposed"])
async def test_a_stop_while_the_child_streams_stops_it_first(
    tmp_path: Path, caps: dict[str, Any]
) -> None:
    child = [{"events": [{"text": "Counting so far: one, two"}, {"hang": True}]}]
    mark = "Counting so far" if caps is EXPOSED else "A subagent works on it"
    result, sid, run = await session(tmp_path, answered(child), caps, stop_when=mark)
    assert result.stop_reason == "cancelled"
    assert not result.late
    parent, child_log = logs_by_role(run, sid)
    # The child ended first, as the user's stop, with what it had said kept.
    (said,) = [r for r in child_log if r["type"] == "assistant/message"]
    assert said.get("interrupted") is True
    assert said["content"][0]["text"] == "Counting so far: one, two"
    assert [r["reason"] for r in child_log if r["type"] == "turn/end"] == ["cancelled"]
    # The parent's call got the child's partial result.
    (res,) = [r for r in parent if r["type"] == "tool/result"]
    assert "Counting so far: one, two" in res["content"][0]["text"]
    assert [r["reason"] for r in parent if r["type"] == "turn/end"] == ["cancelled"]
    # Nothing of either session after the parent's answer.
    wire = [m for _, m in frames(run)]
    answer_at = next(
        i
        for i, m in enumerate(wire)
        if m.get("result", {}) == {"stopReason": "cancelled"}
        or (isinstance(m.get("result"), dict) and m["result"].get("stopReason") == "cancelled")
    )
    assert not [m for m in wire[answer_at:] if m.get("method") == "session/update"]
