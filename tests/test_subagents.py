"""Subagent sessions through the real bridge: the ``task`` tool hands a task to
a child session (its own log, linked both ways), whose answer is the call's
result; the child's model responses are in the parent's script.  Every frame
is checked against the unstable ACP schema (``subagent_update``,
``session_message``); a client without ``clientCapabilities.subagents`` sees
only the parent's tool call; a Stop of the parent stops the child first."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_pinned_sdk_unstable_schema
from harness import (
    SessionSnapshot,
    normalize,
    report,
    run_bridge,
    tool_call,
    wait_until,
    write_script,
)
from support.bridge import Mode
from support.harness import EVENT_LOG_VALIDATOR, Run
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import AcpClient, PromptResult
from acp_bridge.log.reader import session_path
from acp_bridge.log.writer.files import LogFiles
from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing.workspace import WorkspaceEditor

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
    stop_when: str | Callable[[list[Any]], bool] | None = None,
    editor: WorkspaceEditor | None = None,
    mode: Mode = "subprocess",
) -> tuple[PromptResult, str, Any]:
    """One prompt whose model calls ``task``; with ``stop_when``, the user
    presses Stop once a frame holding that text (or passing that test) reached
    the editor; ``editor`` serves terminals and permission requests."""
    box: dict[str, Any] = {}

    def seen(client: AcpClient) -> bool:
        if callable(stop_when):
            return stop_when([m for _, m in client.transcript])
        return any(str(stop_when) in str(m) for _, m in client.transcript)

    async def play(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            if editor is not None:
                editor.install(client, tg)
            await client.initialize(caps)
            sid = box["sid"] = await client.new_session(str(tmp_path))

            async def run() -> None:
                box["result"] = await client.prompt(sid, "Count them")

            tg.start_soon(run)
            if stop_when is not None:
                with anyio.fail_after(10):  # a condition of the editor wakes no message
                    await wait_until(lambda: seen(client))
                await client.notify("session/cancel", {"sessionId": sid})
            await client.wait_until(lambda: "result" in box, within=10)
            if editor is not None:
                editor.kill_all()

    run = await run_bridge(write_script(tmp_path, script), tmp_path / "state", play, mode=mode)
    run.check_logs()
    load_pinned_sdk_unstable_schema().check_transcript(run.client.transcript)
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
    assert start["owner"] == {"session_id": sid, "tool_call": "call_1", "depth": 1}
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


@pytest.mark.parametrize("caps", [NO_FS, EXPOSED], ids=["hidden", "exposed"])
async def test_whole_sessions_with_a_subagent(
    tmp_path: Path, caps: dict[str, Any], snapshot: SnapshotAssertion
) -> None:
    """The wire both ways and both logs, normalized, as snapshots."""
    _, sid, run = await session(tmp_path, answered(CHILD_ANSWERS), caps)
    parent, child = logs_by_role(run, sid)
    whole = {
        "wire": [list(e) for e in run.client.transcript],
        "parent_log": parent,
        "child_log": child,
    }
    assert normalize(whole, paths={str(tmp_path): "<tmp>"}) == snapshot.use_extension(
        SessionSnapshot
    )


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
    sessions = tmp_path / "state" / "sessions"

    def child_streamed(_: list[Any]) -> bool:
        # A hidden editor never sees the child's text: Stop once the child's
        # log holds it, so the stop falls while the child streams.
        return any("Counting so far" in p.read_text() for p in sessions.glob("*.jsonl"))

    mark = "Counting so far" if caps is EXPOSED else child_streamed
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


def stopped_in_order(run: Any, sid: str, result: PromptResult) -> list[dict[str, Any]]:
    """The Stop contract for parent and child; the child's log."""
    assert result.stop_reason == "cancelled"
    assert not result.late
    parent, child = logs_by_role(run, sid)
    assert [r["reason"] for r in child if r["type"] == "turn/end"] == ["cancelled"]
    assert [r["reason"] for r in parent if r["type"] == "turn/end"] == ["cancelled"]
    # Every child tool call has its result, every announced one its final status.
    calls = {r["tool_call_id"] for r in child if r["type"] == "tool/call"}
    assert calls == {r["tool_call_id"] for r in child if r["type"] == "tool/result"}
    wire = [m for _, m in frames(run)]
    answer_at = next(
        i
        for i, m in enumerate(wire)
        if isinstance(m.get("result"), dict) and m["result"].get("stopReason") == "cancelled"
    )
    assert not [m for m in wire[answer_at:] if m.get("method") == "session/update"]
    return child


def child_tool_running(frames: list[Any]) -> bool:
    """A tool call of the child (not the parent's ``task`` call) is in progress."""
    announced = [
        m["params"]["update"]["sessionId"]
        for m in frames
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "subagent_update"
    ]
    return any(
        m.get("method") == "session/update"
        and m["params"]["sessionId"] in announced
        and m["params"]["update"].get("status") == "in_progress"
        for m in frames
    )


TERMINAL = {**EXPOSED, "terminal": True}


async def test_a_stop_while_the_child_runs_a_command(tmp_path: Path) -> None:
    editor = WorkspaceEditor(tmp_path)
    editor.permission_answers = ["allow_once"]
    waiting = editor.waiting_on_command("begun")
    command = tool_call("c_cmd", "run_command", command="echo begun; sleep 30")
    child = [{"events": [command]}, {"events": [{"text": "never"}]}]
    result, sid, run = await session(
        tmp_path, answered(child), TERMINAL, stop_when=lambda _: waiting(), editor=editor
    )
    child_log = stopped_in_order(run, sid, result)
    (res,) = [r for r in child_log if r["type"] == "tool/result"]
    assert res["tool_call_id"] == "c_cmd"
    assert "begun" in res["content"][0]["text"]  # the command's real partial output
    parent, _ = logs_by_role(run, sid)
    (task_result,) = [r for r in parent if r["type"] == "tool/result"]
    assert task_result["content"][0]["text"].startswith("The subagent was stopped.")
    assert not editor.running()


@pytest.mark.parametrize("caps", [NO_FS, EXPOSED], ids=["hidden", "exposed"])
async def test_a_stop_while_the_child_waits_for_a_permission(
    tmp_path: Path, caps: dict[str, Any]
) -> None:
    editor = WorkspaceEditor(tmp_path)
    editor.permission_answers = ["hang"]
    edit = tool_call("c_edit", "write_file", path=str(tmp_path / "a.txt"), content="x")
    child = [{"events": [edit]}, {"events": [{"text": "never"}]}]
    result, sid, run = await session(
        tmp_path, answered(child), caps, stop_when="session/request_permission", editor=editor
    )
    child_log = stopped_in_order(run, sid, result)
    ((_, params),) = [c for c in editor.calls if c[0] == "session/request_permission"]
    (child_id,) = [s for s in run.logs() if s != sid]
    # The request names the child: its session for a client that knows it.
    assert params["sessionId"] == (child_id if caps is EXPOSED else sid)
    title = params["toolCall"]["title"]
    assert title.startswith("Subagent (Count the files): ") is (caps is NO_FS)
    # Its call id is the child's own, and for a hidden child it cannot be taken
    # for one of the parent's calls (the parent's session has a call_1 too).
    call_id = params["toolCall"]["toolCallId"]
    assert call_id == ("c_edit" if caps is EXPOSED else f"{child_id}/c_edit")
    (res,) = [r for r in child_log if r["type"] == "tool/result"]
    assert "permission" in res["content"][0]["text"]
    assert not (tmp_path / "a.txt").exists()


async def test_a_child_cancelled_alone_leaves_the_parent_running(tmp_path: Path) -> None:
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(EXPOSED)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                box["result"] = await client.prompt(sid, "Count them")

            tg.start_soon(run)
            await client.wait_until(lambda: "Counting so far" in str(client.transcript))
            (announce,) = [
                m["params"]["update"]
                for _, m in client.transcript
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "subagent_update"
            ]
            assert announce["capabilities"] == {"cancel": {}}
            await client.notify("session/cancel", {"sessionId": announce["sessionId"]})

    child = [{"events": [{"text": "Counting so far: one"}, {"hang": True}]}]
    run = await run_bridge(write_script(tmp_path, answered(child)), tmp_path / "state", play)
    run.check_logs()
    load_pinned_sdk_unstable_schema().check_transcript(run.client.transcript)
    result, sid = box["result"], box["sid"]
    assert result.stop_reason == "end_turn"  # the parent went on
    said = "".join(
        u["content"]["text"]
        for u in updates_of(run, sid)
        if u["sessionUpdate"] == "agent_message_chunk"
    )
    (seen,) = parse_report(said)["tool_results"]
    assert seen["text"] == "The subagent was stopped. What it had said:\nCounting so far: one"
    parent, child_log = logs_by_role(run, sid)
    assert [r["reason"] for r in child_log if r["type"] == "turn/end"] == ["cancelled"]
    assert [r["reason"] for r in parent if r["type"] == "turn/end"] == ["end_turn"]


CHILD_REPORT = [{"events": [{"report": ["tool_names", "message_count", "first_user_text"]}]}]


@pytest.mark.parametrize(("depth", "nested"), [((), False), (("--subagent-depth", "2"), True)])
async def test_a_child_has_its_own_context_and_nests_only_as_deep_as_allowed(
    tmp_path: Path, depth: tuple[str, ...], nested: bool
) -> None:
    async def play(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        sid = await client.new_session(str(tmp_path))
        box.append(await client.prompt(sid, "Count them"))

    box: list[PromptResult] = []
    script = write_script(tmp_path, answered(CHILD_REPORT))
    run = await run_bridge(script, tmp_path / "state", play, extra=depth)
    run.check_logs()
    (seen,) = report(box[0])["tool_results"]
    child = parse_report(seen["text"])
    assert child["message_count"] == 1  # nothing of the parent's conversation
    assert child["first_user_text"] == "How many files?"
    assert ("task" in child["tool_names"]) is nested
    assert "run_command" in child["tool_names"]


async def test_depth_zero_offers_no_task_tool(tmp_path: Path) -> None:
    async def play(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        sid = await client.new_session(str(tmp_path))
        box.append(await client.prompt(sid, "Count them"))

    box: list[PromptResult] = []
    script = write_script(tmp_path, {"responses": [{"events": [{"report": ["tool_names"]}]}]})
    await run_bridge(script, tmp_path / "state", play, extra=("--subagent-depth", "0"))
    names = report(box[0])["tool_names"]
    assert "task" not in names
    assert "run_command" in names


@pytest.mark.parametrize(("mode", "written"), [("read_only", False), ("accept_edits", True)])
async def test_a_child_has_its_parents_mode(tmp_path: Path, mode: str, written: bool) -> None:
    """No more rights than the parent: read-only refuses the child's edit
    (and it asks nobody); with accept_edits the child's edit runs without asking."""
    editor = WorkspaceEditor(tmp_path)

    async def play(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            editor.install(client, tg)
            await client.initialize(NO_FS)
            sid = await client.new_session(str(tmp_path))
            await client.request("session/set_mode", {"sessionId": sid, "modeId": mode})
            box.append(await client.prompt(sid, "Write it"))

    box: list[PromptResult] = []
    edit = tool_call("c_edit", "write_file", path=str(tmp_path / "a.txt"), content="x")
    script = answered([{"events": [edit]}, {"events": [{"report": ["tool_results"]}]}])
    run = await run_bridge(write_script(tmp_path, script), tmp_path / "state", play)
    run.check_logs()
    assert "session/request_permission" not in editor.methods()
    assert (tmp_path / "a.txt").exists() is written
    (seen,) = report(box[0])["tool_results"]
    (inner,) = parse_report(seen["text"])["tool_results"]
    assert inner["is_error"] is not written


async def test_a_crash_mid_child_loses_nothing_the_editor_was_shown(
    tmp_path: Path, bridge: Any
) -> None:
    """SIGKILL while the child streams: every chunk the editor got (under the
    child's id) is in the child's log, and the parent's log names the child."""
    story = "Counting the files one by one, and there are many of them to count. " * 4
    child = [{"events": [{"text": story, "chunk_size": 5}, {"hang": True}]}]
    script = write_script(tmp_path, answered(child))
    async with bridge(script=script) as client:
        await client.initialize(EXPOSED)
        sid = await client.new_session(str(tmp_path))
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": client.next_id(),
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "Count"}]},
            }
        )

        def child_chunks() -> str:
            return "".join(
                m["params"]["update"]["content"]["text"]
                for _, m in client.transcript
                if m.get("method") == "session/update"
                and m["params"]["sessionId"] != sid
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )

        await client.wait_until(lambda: len(child_chunks()) >= 20, within=10)
        client.agent.send_signal(signal.SIGKILL)
        await client.agent.wait()
        shown = child_chunks()
    parent, child_log = logs_by_role(Run(client, tmp_path / "state"), sid)
    logged = "".join(
        part[2]
        for r in child_log
        if r["type"] == "stream/delta"
        for part in r["parts"]
        if part[1] == "text"
    )
    assert shown
    assert logged.startswith(shown)
    assert child_log[0]["owner"]["session_id"] == sid
    assert any(
        isinstance(r["update"].get("rawOutput"), dict) for r in parent if r["type"] == "tool/update"
    )


def test_sessions_lists_a_child_under_its_parent_and_show_shows_the_tree(tmp_path: Path) -> None:
    _, sid, run = anyio.run(session, tmp_path, answered(CHILD_ANSWERS), NO_FS)
    (child,) = [s for s in run.logs() if s != sid]
    state = str(tmp_path / "state")

    def cli(*args: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "acp_bridge", *args, "--state-dir", state],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout.splitlines()

    listed = cli("sessions")
    at = {
        line.split()[0] if not line.startswith(" ") else line.split()[1]: i
        for i, line in enumerate(listed)
    }
    assert at[child] == at[sid] + 1  # right under its parent
    assert listed[at[child]].startswith("  └ " + child)
    shown = cli("show", sid)
    assert any(line.startswith(f"    session {child}") for line in shown)
    assert any(line.strip() == f"subagent of {sid} (tool call call_1)" for line in shown)
    assert any(line.startswith("    ") and "There are 3 files." in line for line in shown)


@pytest.mark.parametrize("caps", [NO_FS, EXPOSED], ids=["hidden", "exposed"])
async def test_loading_the_parent_replays_its_children(
    tmp_path: Path, caps: dict[str, Any]
) -> None:
    _, sid, first = await session(tmp_path, answered(CHILD_ANSWERS), NO_FS)
    (child,) = [s for s in first.logs() if s != sid]

    listed: list[str] = []

    async def play(client: AcpClient) -> None:
        await client.initialize(caps)
        # The editor's list holds the parent only: a child is reached through it.
        answer = await client.request("session/list", {"cwd": str(tmp_path)})
        listed.extend(s["sessionId"] for s in answer["result"]["sessions"])
        await client.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )

    again = await run_bridge(
        write_script(tmp_path, answered(CHILD_ANSWERS)), tmp_path / "state", play
    )
    load_pinned_sdk_unstable_schema().check_transcript(again.client.transcript)
    assert listed == [sid]
    replayed = [
        m["params"]["update"]
        for _, m in again.client.transcript
        if m.get("method") == "session/update"
    ]
    kinds = [u["sessionUpdate"] for u in replayed]
    if caps is NO_FS:
        assert "subagent_update" not in kinds
        assert "session_message" not in kinds
        return
    announce = kinds.index("subagent_update")
    assert replayed[announce]["sessionId"] == child
    assert replayed[announce]["title"] == "Count the files"
    (back,) = [u for u in replayed if u["sessionUpdate"] == "session_message"]
    assert kinds.index("session_message") > announce
    assert back["senderSessionId"] == child
    assert back["content"] == [{"type": "text", "text": "There are 3 files."}]


async def test_children_beyond_the_bound_wait_for_a_place(tmp_path: Path) -> None:
    """--subagents-at-once 1: a second session's child starts only once the
    first child has ended (each session has its own script cursor)."""
    child = [{"events": [{"text": "Counting so far: one"}, {"hang": True}]}]

    def child_logs() -> list[list[dict[str, Any]]]:
        logs = Run(client_box[0], tmp_path / "state").logs()
        return [recs for recs in logs.values() if recs and "owner" in recs[0]]

    client_box: list[AcpClient] = []
    results: list[PromptResult] = []

    async def play(client: AcpClient) -> None:
        client_box.append(client)
        await client.initialize(NO_FS)
        first = await client.new_session(str(tmp_path))
        second = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as tg:

            async def run(sid: str) -> None:
                results.append(await client.prompt(sid, "Count them"))

            tg.start_soon(run, first)
            with anyio.fail_after(10):
                await wait_until(lambda: len(child_logs()) == 1)
            tg.start_soon(run, second)
            # The second task call says it waits for a place.
            await client.wait_until(
                lambda: "Waiting for a free place" in str(client.transcript), within=10
            )
            assert len(child_logs()) == 1  # no place for the second child yet
            await client.notify("session/cancel", {"sessionId": first})
            with anyio.fail_after(10):
                await wait_until(lambda: len(child_logs()) == 2)
            await client.notify("session/cancel", {"sessionId": second})

    script = write_script(tmp_path, answered(child))
    run = await run_bridge(script, tmp_path / "state", play, extra=("--subagents-at-once", "1"))
    run.check_logs()
    assert [r.stop_reason for r in results] == ["cancelled", "cancelled"]
    one, two = sorted(child_logs(), key=lambda recs: recs[0]["at"])
    (first_end,) = [r for r in one if r["type"] == "turn/end"]
    assert two[0]["at"] >= first_end["at"]


async def test_a_disconnect_mid_child_is_no_stop_for_it_either(tmp_path: Path) -> None:
    """stdin closed while the child streams: both turns end ``disconnected``
    and neither keeps an interrupted message (invariant I5)."""
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(EXPOSED)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": client.next_id(),
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "Count"}]},
            }
        )
        await client.wait_until(lambda: "Counting so far" in str(client.transcript), within=10)

    child = [{"events": [{"text": "Counting so far: one"}, {"hang": True}]}]
    run = await run_bridge(write_script(tmp_path, answered(child)), tmp_path / "state", play)
    run.check_logs()
    parent, child_log = logs_by_role(run, box["sid"])
    for log in (parent, child_log):
        assert [r["reason"] for r in log if r["type"] == "turn/end"] == ["disconnected"]
    assert not [r for r in child_log if r["type"] == "assistant/message"]


async def test_a_stop_while_the_editor_reads_slowly_keeps_the_contract(tmp_path: Path) -> None:
    """The editor stops reading while the child streams, then presses Stop: the
    child's records are written and the parent answers without waiting for the
    editor to read (no shielded wait on stdout), so the parent's Stop is not
    forced and its ``task`` result is the child's stopped partial text."""
    from support.harness import wait_for_a_full_pipe

    from acp_bridge.client import bridge_command, prompt_params, running
    from acp_bridge.log.reader import read_records

    child = [
        {"events": [*({"text": f"chunk {i:04d} " + "x" * 200} for i in range(400)), {"hang": True}]}
    ]
    state = tmp_path / "state"
    script = write_script(tmp_path, answered(child))
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state)
    )

    def logs() -> dict[str, list[dict[str, Any]]]:
        return {p.stem: read_records(p) for p in (state / "sessions").glob("*.jsonl")}

    async with running(command) as client:
        await client.initialize(EXPOSED)
        sid = await client.new_session(str(tmp_path))
        prompt = await client.send_request("session/prompt", prompt_params(sid, "Count them"))
        await client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["sessionId"] != sid
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        client.agent.stdout.pause()
        await wait_for_a_full_pipe(client)
        await client.notify("session/cancel", {"sessionId": sid})

        def parent_ended() -> bool:
            return any(r["type"] == "turn/end" for r in logs().get(sid, []))

        with anyio.fail_after(30):
            await wait_until(parent_ended)
        client.agent.stdout.resume()
        answer = await client.wait_response(prompt)
        assert answer["result"]["stopReason"] == "cancelled"
        assert await client.finish() == 0
    wire = list(client.messages)
    at = wire.index(answer)
    assert not [m for m in wire[at:] if m.get("method") == "session/update"]
    records = logs()
    (child_id,) = [k for k in records if k != sid]
    seen = "".join(
        m["params"]["update"]["content"]["text"]
        for m in wire[:at]
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == child_id
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    (said,) = [r for r in records[child_id] if r["type"] == "assistant/message"]
    assert said.get("interrupted") is True
    assert said["content"][0]["text"] == seen
    (res,) = [r for r in records[sid] if r["type"] == "tool/result"]
    text = res["content"][0]["text"]
    assert text.startswith("The subagent was stopped.")
    assert seen in text
    (end,) = [r for r in records[sid] if r["type"] == "turn/end"]
    assert end["reason"] == "cancelled"
    assert not end.get("forced")


async def test_a_long_answer_is_cut_as_other_tool_outputs_are(tmp_path: Path) -> None:
    """The child's answer is capped like any tool's output, saying it was cut
    and where the whole answer is (the child's session)."""
    long = [{"events": [{"text": "y" * 60_000}]}]
    result, sid, run = await session(tmp_path, answered(long), NO_FS)
    assert result.stop_reason == "end_turn"
    parent, child = logs_by_role(run, sid)
    (res,) = [r for r in parent if r["type"] == "tool/result"]
    text = res["content"][0]["text"]
    assert len(text) < 51_000
    assert "[output truncated: showing the first 50000 of 60000 characters]" in text
    (start,) = [r for r in child if r["type"] == "session/start"]
    assert f"session {start['session_id']}" in text


async def test_a_running_child_is_busy_here_not_open_elsewhere(tmp_path: Path) -> None:
    """session/load or session/delete of a child running in this process says it
    is busy (delete is refused while it runs), never that another process has it open."""
    child = [{"events": [{"text": "Counting"}, {"hang": True}]}]
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            await client.initialize(EXPOSED)
            sid = await client.new_session(str(tmp_path))

            async def run() -> None:
                box["result"] = await client.prompt(sid, "Count them")

            tg.start_soon(run)
            with anyio.fail_after(10):
                await wait_until(lambda: "Counting" in str(client.transcript))
            kid = next(
                m["params"]["sessionId"]
                for _, m in client.transcript
                if m.get("method") == "session/update" and m["params"]["sessionId"] != sid
            )
            params = {"sessionId": kid, "cwd": str(tmp_path), "mcpServers": []}
            box["load"] = await client.send_request("session/load", params)
            box["answer"] = await client.wait_response(box["load"])
            deleting = await client.send_request("session/delete", {"sessionId": kid})
            box["deleted"] = await client.wait_response(deleting)
            await client.notify("session/cancel", {"sessionId": sid})
            await client.wait_until(lambda: "result" in box, within=10)

    await run_bridge(write_script(tmp_path, answered(child)), tmp_path / "state", play)
    error = box["answer"]["error"]
    assert error["data"]["kind"] == "session_busy"
    assert "another" not in error["message"]
    refused = box["deleted"]["error"]
    assert refused["data"]["kind"] == "session_busy"
    assert "deleted" in refused["message"]


async def test_a_child_loaded_by_its_id_has_the_rights_it_had(tmp_path: Path) -> None:
    """A child loaded by its own id keeps its depth (no ``task`` at the maximum
    depth) and its parent's mode, both read from its log."""
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
        await client.prompt(sid, "Count them")

    state = tmp_path / "state"
    run = await run_bridge(write_script(tmp_path, answered(CHILD_ANSWERS)), state, play)
    _, child = logs_by_role(run, box["sid"])
    (start,) = [r for r in child if r["type"] == "session/start"]
    kid = start["session_id"]
    # The depth and the mode given by the parent are records of the published schema.
    assert start["owner"]["depth"] == 1
    assert [(r["mode"], r["via"]) for r in child if r["type"] == "session/mode"] == [
        ("read_only", "parent")
    ]
    for record in child:
        assert [e.message for e in EVENT_LOG_VALIDATOR.iter_errors(record)] == [], record

    async def load(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        params = {"sessionId": kid, "cwd": str(tmp_path), "mcpServers": []}
        box["loaded"] = await client.request("session/load", params)
        box["next"] = await client.prompt(kid, "And now?")

    names = {"responses": [{"events": [{"report": ["tool_names"]}]}]}
    await run_bridge(write_script(tmp_path, names), state, load)
    (mode,) = [o for o in box["loaded"]["result"]["configOptions"] if o["id"] == "mode"]
    assert mode["currentValue"] == "read_only"
    offered = report(box["next"])["tool_names"]
    assert "read_file" in offered
    assert "task" not in offered


@pytest.mark.parametrize("parent_gone", [False, True], ids=["parent", "orphans"])
async def test_deleting_a_session_deletes_its_subagents_sessions(
    tmp_path: Path, parent_gone: bool
) -> None:
    """A child's log is its parent's part (never listed alone): deleting the
    parent deletes it, and its own children; other sessions stay.  Children
    left by a parent deleted before (``orphans``) go when its id is deleted."""
    box: dict[str, Any] = {}
    nested = tool_call("call_2", "task", description="Look closer", prompt="Which files?")
    script = {
        "responses": [
            {"events": [TASK]},
            {"events": [nested]},
            *CHILD_ANSWERS,
            {"events": [{"text": "The child is done."}]},
            {"events": [{"text": "The parent is done."}]},
        ]
    }

    async def play(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.prompt(sid, "Count them")

    state = tmp_path / "state"
    extra = ("--subagent-depth", "2")
    run = await run_bridge(write_script(tmp_path, script), state, play, extra=extra)
    owners = {sid: records[0].get("owner") for sid, records in run.logs().items()}
    (child,) = [sid for sid, owner in owners.items() if owner and owner["session_id"] == box["sid"]]
    (grandchild,) = [sid for sid, owner in owners.items() if owner and owner["session_id"] == child]
    assert len(owners) == 3
    if parent_gone:  # as an older version's delete left it: the children only
        (state / "sessions" / f"{box['sid']}.jsonl").unlink()

    async def delete(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        other = box["other"] = await client.new_session(str(tmp_path))
        await client.prompt(other, "Hi")
        box["deleted"] = await client.request("session/delete", {"sessionId": box["sid"]})
        params = {"sessionId": grandchild, "cwd": str(tmp_path), "mcpServers": []}
        box["load"] = await client.request("session/load", params)

    hello = {"responses": [{"events": [{"text": "Hello."}]}]}
    await run_bridge(write_script(tmp_path, hello), state, delete)
    assert box["deleted"]["result"] == {}
    assert set(run.logs()) == {box["other"]}
    assert "no stored session" in box["load"]["error"]["message"]


async def test_a_parent_open_elsewhere_keeps_its_subagents_when_the_delete_fails(
    tmp_path: Path,
) -> None:
    """session/delete of a parent that another process has open fails as
    locked, and leaves every log as it was: its children are not deleted
    before the parent's own lock is known to be free."""
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.prompt(sid, "Count them")

    state = tmp_path / "state"
    run = await run_bridge(write_script(tmp_path, answered(CHILD_ANSWERS)), state, play)
    before = set(run.logs())
    assert len(before) == 2

    async def delete(client: AcpClient) -> None:
        await client.initialize(NO_FS)
        box["deleted"] = await client.request("session/delete", {"sessionId": box["sid"]})

    held = LogFiles().claim(session_path(state, box["sid"]))  # the parent, open elsewhere
    try:
        await run_bridge(write_script(tmp_path, {"responses": []}), state, delete)
    finally:
        held.close()
    assert box["deleted"]["error"]["data"]["kind"] == "session_locked"
    assert set(run.logs()) == before
