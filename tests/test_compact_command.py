"""``/compact [instructions]`` through the real subprocess (the keyless provider).

The command is announced with ``available_commands_update``; it compacts at
once and answers with a visible result (what was summarized, the tokens
before and after), or says there is nothing to compact; a client that opted
in to ``session.compaction`` also gets ``compaction_update`` in_progress then
completed with the summary.  A Stop during it cancels it and leaves the
history as it was.  A load replays the command and its answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_acp_schema, load_pinned_sdk_schema
from support.harness import (
    cwd_for_tests,
    record_logged,
    report,
    run_bridge,
    wait_until,
    write_script,
)

from acp_bridge.client import AcpClient
from acp_bridge.log.derive import SUMMARY_HEADER, derive_messages

pytestmark = pytest.mark.anyio

CWD = cwd_for_tests()
OPTED_IN = {"fs": {"readTextFile": False, "writeTextFile": False}, "session": {"compaction": {}}}
REPORT = ["message_count", "first_user_text", "last_user_text"]


def script(compaction: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "responses": [
            {"events": [{"text": "The capital of France is Paris."}]},
            {"events": [{"text": "Its river is the Seine."}]},
            {"events": [{"report": REPORT}]},
        ],
        "when_exhausted": "repeat_last",
    }
    if compaction is not None:
        out["compaction"] = compaction
    return out


def compaction_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "compaction_update"]


@pytest.mark.parametrize("opted", [False, True], ids=["notice", "compaction_update"])
async def test_compact_now(tmp_path: Path, opted: bool) -> None:
    # The summary request's answer: what it was sent (so the test sees the instructions).
    path = write_script(tmp_path, script({"events": [{"report": ["last_user_text"]}]}))
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(OPTED_IN if opted else None)
        sid = await client.new_session(CWD)
        box["empty"] = await client.prompt(sid, "/compact")
        await client.prompt(sid, "What is the capital of France?")
        await client.prompt(sid, "And its river?")
        box["compact"] = await client.prompt(sid, "/compact keep the names of places")
        box["after"] = await client.prompt(sid, "Where were we?")

    run = await run_bridge(path, tmp_path / "state", play, mode="inprocess")
    run.check_logs()
    empty = box["empty"]
    assert empty.stop_reason == "end_turn"
    # Announced right after session/new, before any prompt.
    commands = next(
        u for u in run.client.updates if u["sessionUpdate"] == "available_commands_update"
    )
    assert {"regenerate", "compact"} <= {c["name"] for c in commands["availableCommands"]}
    assert empty.text().startswith("Nothing to compact yet")
    assert compaction_updates(empty.updates) == []

    compact = box["compact"]
    assert compact.stop_reason == "end_turn"
    said = compact.text()
    assert said.startswith(
        "Compacted the conversation: 4 earlier messages were replaced by a summary"
    )
    assert "tokens before, about" in said
    shown = compaction_updates(compact.updates)
    if opted:
        assert [u["status"] for u in shown] == ["in_progress", "completed"]
        summary = shown[1]["summary"][0]["text"]
        assert "Summary:" not in said  # the client shows the summary itself
    else:
        assert shown == []
        summary = said.split("Summary:\n\n", 1)[1]
    # The summary request carried the user's instructions and the conversation.
    assert "with these instructions: keep the names of places" in summary
    # The next request starts with the summary.
    facts = report(box["after"])
    assert facts["first_user_text"].startswith(SUMMARY_HEADER)
    assert "keep the names of places" in facts["first_user_text"]
    assert facts["last_user_text"].endswith("Where were we?")
    [records] = run.logs().values()
    [done] = [r for r in records if r["type"] == "compaction" and r["status"] == "completed"]
    assert done["trigger"] == "command"
    [begun] = [r for r in records if r["type"] == "compaction" and r["status"] == "in_progress"]
    assert begun["instructions"] == "keep the names of places"
    start = next(
        r
        for r in records
        if r["type"] == "turn/start" and r.get("command") == "compact" and r["turn"] == 4
    )
    assert start["prompt"] == [{"type": "text", "text": "/compact keep the names of places"}]
    schema = load_pinned_sdk_schema() if opted else load_acp_schema()
    assert schema is not None
    schema.check_transcript(run.client.transcript)


async def test_a_stop_during_compact_cancels_it(tmp_path: Path) -> None:
    path = write_script(tmp_path, script({"events": [{"hang": True}]}))
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(OPTED_IN)
        sid = await client.new_session(CWD)
        await client.prompt(sid, "What is the capital of France?")
        await client.prompt(sid, "And its river?")
        [log] = (tmp_path / "state" / "sessions").glob("*.jsonl")
        box["before"] = derive_messages(run_records(log))

        async def stop() -> None:
            with anyio.fail_after(10):
                await wait_until(record_logged(tmp_path / "state", "compaction", turn=3))
            await client.notify("session/cancel", {"sessionId": sid})

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop)
            box["stopped"] = await client.prompt(sid, "/compact")
        box["after"] = await client.prompt(sid, "Where were we?")
        box["log"] = run_records(log)

    run = await run_bridge(path, tmp_path / "state", play, mode="inprocess")
    run.check_logs()
    stopped = box["stopped"]
    assert stopped.stop_reason == "cancelled"
    assert [u["status"] for u in compaction_updates(stopped.updates)] == [
        "in_progress",
        "cancelled",
    ]
    assert stopped.text() == "Compaction cancelled; the conversation is unchanged."
    records = box["log"]
    statuses = [r["status"] for r in records if r["type"] == "compaction"]
    assert statuses == ["in_progress", "cancelled"]
    ends = [r for r in records if r["type"] == "turn/end"]
    assert [e["reason"] for e in ends] == ["end_turn", "end_turn", "cancelled", "end_turn"]
    # Nothing changed: the next request has the whole conversation, no summary.
    facts = report(box["after"])
    assert facts["first_user_text"] == "What is the capital of France?"
    assert derive_messages(records)[: len(box["before"])] == box["before"]


async def test_load_replays_a_compact_turn(tmp_path: Path) -> None:
    path = write_script(tmp_path, script())
    box: dict[str, Any] = {}

    async def first(client: AcpClient) -> None:
        await client.initialize()
        box["sid"] = await client.new_session(CWD)
        await client.prompt(box["sid"], "What is the capital of France?")
        box["live"] = (await client.prompt(box["sid"], "/compact")).text()

    await run_bridge(path, tmp_path / "state", first)

    async def second(client: AcpClient) -> None:
        await client.initialize()
        params = {"sessionId": box["sid"], "cwd": CWD, "mcpServers": []}
        assert "result" in await client.request("session/load", params)
        box["replayed"] = list(client.updates)

    run = await run_bridge(path, tmp_path / "state", second, mode="inprocess")
    run.check_logs()
    replayed = box["replayed"]
    users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["What is the capital of France?", "/compact"]
    answer = [
        u["content"]["text"]
        for u in replayed
        if u["sessionUpdate"] == "agent_message_chunk"
        and (u.get("_meta") or {}).get("acpBridge", {}).get("compaction")
    ]
    assert answer == [box["live"]]


def run_records(path: Path) -> list[dict[str, Any]]:
    from acp_bridge.log.reader import read_records

    return read_records(path)


async def test_a_failed_summary_changes_nothing_and_says_so(tmp_path: Path) -> None:
    error = {"error": {"message": "the model is overloaded", "kind": "overloaded"}}
    path = write_script(tmp_path, script({"events": [error]}))
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize(OPTED_IN)
        sid = await client.new_session(CWD)
        await client.prompt(sid, "What is the capital of France?")
        box["failed"] = await client.prompt(sid, "/compact")
        box["after"] = await client.prompt(sid, "Where were we?")

    run = await run_bridge(path, tmp_path / "state", play, mode="inprocess")
    run.check_logs()
    failed = box["failed"]
    assert failed.stop_reason == "end_turn"
    shown = compaction_updates(failed.updates)
    assert [u["status"] for u in shown] == ["in_progress", "failed"]
    assert shown[1]["error"] == "the model is overloaded"
    assert failed.text() == "Could not compact the conversation: the model is overloaded"
    [records] = run.logs().values()
    history = derive_messages(records)  # as it was: no summary
    assert history[0]["content"] == [{"type": "text", "text": "What is the capital of France?"}]
    [outcome] = [r for r in records if r["type"] == "compaction" and r["status"] != "in_progress"]
    assert outcome["status"] == "failed"
    assert outcome["error"]["kind"] == "overloaded"
    schema = load_pinned_sdk_schema()
    assert schema is not None
    schema.check_transcript(run.client.transcript)


async def test_show_lists_the_compaction_and_the_records_it_summarized(tmp_path: Path) -> None:
    path = write_script(tmp_path, script())

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(CWD)
        await client.prompt(sid, "What is the capital of France?")
        await client.prompt(sid, "/compact")

    run = await run_bridge(path, tmp_path / "state", play, mode="inprocess")
    [records] = run.logs().values()
    from acp_bridge.sessions_cli import timeline

    lines = timeline(records)
    assert any('user: "What is the capital of France?"' in line for line in lines)
    assert any(line.startswith("turn 2") and line.endswith("(/compact)") for line in lines)
    [done] = [line for line in lines if "compaction" in line and "completed" in line]
    assert "(command): completed: 2 message(s) summarized" in done
    assert 'summary "Summary of the conversation: the user said' in done


async def test_a_failed_automatic_compaction_lets_the_turn_go_on(tmp_path: Path) -> None:
    error = {"error": {"message": "the model is overloaded", "kind": "overloaded"}}
    scripted = script({"events": [error]})
    # The first answer reports 1,710 tokens used: the next request passes 80% of 2,000.
    scripted["responses"][0]["events"].append(
        {"usage": {"input_tokens": 1700, "output_tokens": 10}}
    )
    path = write_script(tmp_path, scripted)
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(CWD)
        box["first"] = await client.prompt(sid, "What is the capital of France?")
        box["second"] = await client.prompt(sid, "And its river?")

    run = await run_bridge(
        path, tmp_path / "state", play, extra=("--context-window", "2000"), mode="inprocess"
    )
    run.check_logs()
    second = box["second"]
    assert second.stop_reason == "end_turn"
    assert second.text() == "Its river is the Seine."
    notices = [
        u["content"]["text"]
        for u in second.updates
        if u["sessionUpdate"] == "agent_thought_chunk"
        and (u.get("_meta") or {}).get("acpBridge", {}).get("compaction")
    ]
    assert notices == ["Could not compact the conversation: the model is overloaded"]
    [records] = run.logs().values()
    assert [r["status"] for r in records if r["type"] == "compaction"] == ["in_progress", "failed"]


async def test_a_failed_compaction_is_a_notice_for_a_client_that_takes_them(
    tmp_path: Path,
) -> None:
    error = {"error": {"message": "the model is overloaded", "kind": "overloaded"}}
    scripted = script({"events": [error]})
    scripted["responses"][0]["events"].append(
        {"usage": {"input_tokens": 1700, "output_tokens": 10}}
    )
    path = write_script(tmp_path, scripted)
    box: dict[str, Any] = {}
    notices_caps = {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "session": {"notices": {}},
    }

    async def play(client: AcpClient) -> None:
        await client.initialize(notices_caps)
        sid = await client.new_session(CWD)
        await client.prompt(sid, "What is the capital of France?")
        box["second"] = await client.prompt(sid, "And its river?")

    run = await run_bridge(
        path, tmp_path / "state", play, extra=("--context-window", "2000"), mode="inprocess"
    )
    second = box["second"]
    assert second.stop_reason == "end_turn"
    assert [u for u in second.updates if u["sessionUpdate"] == "agent_thought_chunk"] == []
    (notice,) = [u for u in second.updates if u["sessionUpdate"] == "notice"]
    assert notice == {
        "sessionUpdate": "notice",
        "severity": "error",
        "title": "Could not compact the conversation",
        "description": "Could not compact the conversation: the model is overloaded",
    }
    schema = load_pinned_sdk_schema()
    assert schema is not None
    schema.check_transcript(run.client.transcript)
