"""The incremental history equals the full derivation after every record.

`HistoryProjection` keeps the model history up to date as records are
appended; `derive_messages` is the reference.  They are compared after every
record of: random logs of surface records that no agent would write (late
results, reused call ids, blank prompts, refusals of old turns), random valid
logs (the generators of test_log_check.py), the snapshot sessions, and a
long multi-turn session run through the real subprocess, where the model's
own report of the history it received is compared with the reference too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.harness import ROOT, run_bridge, write_script
from test_log_check import LogBuilder, random_turn

from acp_bridge.client import AcpClient
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import completed_compaction, derive_messages, live_surface
from acp_bridge.log.projection import HistoryProjection, HistoryView
from acp_bridge.log.records import MODEL_TYPES
from acp_bridge.providers.base import ModelRequest
from acp_bridge.providers.scripted import report_lines

Record = dict[str, Any]


def assert_equal_after_every_record(records: list[Record]) -> HistoryProjection:
    """Also its surface (what a compaction is planned from), and before each
    completed compaction the history it says that compaction will leave."""
    projection = HistoryProjection()
    for i, record in enumerate(records):
        if completed_compaction(record):
            after = derive_messages(records[: i + 1])
            assert projection.messages_after(record) == after, f"before record {i}: {record}"
        projection.append(record)
        expected = derive_messages(records[: i + 1])
        view = projection.messages()
        assert list(view) == expected, f"after record {i}: {record}"
        # Asked again with nothing appended: the view made last time (the
        # memo of `messages`); the next record's check holds the memo to
        # the reference once something was appended.
        assert projection.messages() is view, f"after record {i}"
        assert projection.surface() == live_surface(records[: i + 1]), f"after record {i}"
    return projection


# -- random logs of surface records -------------------------------------------------

IDS = st.sampled_from(["c1", "c2", "c3"])
TEXT = st.sampled_from(["a", " ", "", "b c"])


def _text_blocks(kind: str) -> st.SearchStrategy[list[Record]]:
    return st.lists(st.builds(lambda t: {"type": kind, "text": t}, TEXT), max_size=2)


@st.composite
def surface_record(draw: st.DrawFn, turn: int) -> Record:
    # Mostly the current turn, sometimes an older one (a late record).
    turn = draw(st.sampled_from([turn, turn, turn, max(1, turn - 1), 1]))
    kind = draw(
        st.sampled_from(
            ["user/message", "assistant/message", "assistant/message", "tool/result", "turn/end"]
        )
    )
    if kind == "user/message":
        return {"type": kind, "turn": turn, "step": 0, "content": draw(_text_blocks("text"))}
    if kind == "assistant/message":
        calls = draw(
            st.lists(
                st.builds(lambda i: {"type": "tool_call", "id": i, "name": "t", "input": {}}, IDS),
                max_size=2,
            )
        )
        content = draw(_text_blocks("text")) + draw(_text_blocks("reasoning")) + calls
        return {
            "type": kind,
            "turn": turn,
            "step": 1,
            "content": draw(st.permutations(content)),
            "interrupted": draw(st.booleans()),
        }
    if kind == "tool/result":
        return {
            "type": kind,
            "turn": turn,
            "step": 1,
            "tool_call_id": draw(IDS),
            "content": draw(_text_blocks("text")),
            "is_error": False,
        }
    reason = draw(st.sampled_from(["end_turn", "cancelled", "refusal"]))
    return {"type": kind, "turn": turn, "step": 0, "reason": reason, "forced": False}


@st.composite
def surface_logs(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = []
    turn = 1
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 5)) == 0:
            turn += 1
            if draw(st.integers(0, 3)) == 0:
                # A regenerate: this turn answers an earlier user turn again.
                target = draw(st.integers(1, turn - 1)) if turn > 1 else 1
                start = {"type": "turn/start", "turn": turn, "step": 0, "regenerates": target}
                records.append(start)
        records.append(draw(surface_record(turn)))
    return records


@settings(max_examples=400, deadline=None)
@given(surface_logs())
@pytest.mark.slow
def test_random_surface_logs(records: list[Record]) -> None:
    assert_equal_after_every_record(records)


def _user(seq: Any, text: str, turn: int = 1) -> Record:
    return {
        "type": "user/message",
        "seq": seq,
        "turn": turn,
        "step": 0,
        "content": [{"type": "text", "text": text}],
    }


def _reply(seq: Any, text: str, turn: int = 1) -> Record:
    return {
        "type": "assistant/message",
        "seq": seq,
        "turn": turn,
        "step": 1,
        "content": [{"type": "text", "text": text}],
        "interrupted": False,
    }


def _compaction(seq: int, kept_from: int, pinned: list[Any]) -> Record:
    return {
        "type": "compaction",
        "seq": seq,
        "turn": 1,
        "step": 0,
        "status": "completed",
        "summary": "S",
        "kept_from": kept_from,
        "pinned": pinned,
    }


@pytest.mark.parametrize("late_seq", [0, 0.0, True])
def test_a_second_compaction_that_pins_a_repeated_seq(late_seq: Any) -> None:
    """A late record repeats the seq of a record the first compaction
    summarized (or a seq equal to it as a number); the second compaction pins
    that seq.  The whole log's rule brings the summarized record back, and so
    must the projection, which then cannot take its shortcut."""
    records = [
        _user(0, "first"),
        _reply(1, "one"),
        _user(2, "second"),
        _compaction(3, 2, []),
        _reply(late_seq, "late"),
        _compaction(5, 5, [0]),
    ]
    assert_equal_after_every_record(records)


def test_a_clear_that_also_regenerates() -> None:
    """A hand-written /clear turn that also names a turn it regenerates: a late
    reply of that turn stays out of the history, as derive_messages has it."""
    records = [
        _user(0, "q"),
        {
            "type": "turn/start",
            "seq": 1,
            "turn": 2,
            "step": 0,
            "command": "clear",
            "regenerates": 1,
        },
        _user(2, "q2", turn=3),
        _reply(3, "late reply of turn 1"),
    ]
    projection = assert_equal_after_every_record(records)
    assert "late reply" not in json.dumps(list(projection.messages()))


def test_a_refused_turn_that_opened_the_window() -> None:
    """The window began with turn 2's prompt; refusing turn 2 undoes that boundary."""
    records = [
        {"type": "user/message", "turn": 1, "step": 0, "content": [{"type": "text", "text": "q1"}]},
        {"type": "assistant/message", "turn": 1, "step": 1, "content": [], "interrupted": False},
        {"type": "assistant/message", "turn": 1, "step": 1, "interrupted": False,
         "content": [{"type": "text", "text": "a1"}]},
        {"type": "user/message", "turn": 2, "step": 0, "content": [{"type": "text", "text": "q2"}]},
        {"type": "turn/end", "turn": 2, "step": 0, "reason": "refusal", "forced": False},
        {"type": "assistant/message", "turn": 3, "step": 1, "interrupted": True,
         "content": [{"type": "text", "text": "a3"}]},
    ]  # fmt: skip
    projection = assert_equal_after_every_record(records)
    assert list(projection.messages())[-1]["content"] == [
        {"type": "text", "text": "a1"},
        {"type": "text", "text": "a3"},
    ]


# -- random valid logs ----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_random_valid_logs(data: st.DataObject) -> None:
    b = LogBuilder()
    for _ in range(data.draw(st.integers(1, 8))):
        random_turn(b, data)
    check_log(b.records)
    assert_equal_after_every_record(b.records)


@pytest.mark.slow
def test_a_long_valid_session_keeps_a_short_window() -> None:
    """The stable part grows with the session: the window stays one turn long."""
    b = LogBuilder()
    projection = HistoryProjection()
    for turn in range(200):
        b.prompt(f"question {turn}")
        b.tool_step(
            [(0, "text", "Let me look.")],
            [{"type": "tool_call", "id": f"call_{turn}", "name": "read", "input": {}}],
        )
        b.end_step("tool_use")
        b.reply_step([(0, "text", f"answer {turn}")])
        b.end_turn("end_turn")
    for record in b.records:
        projection.append(record)
    window = projection.messages()
    assert list(window) == derive_messages(b.records)
    assert len(window) == 800
    # Only the last turn's messages are derived again on the next call.
    assert len(window._window) <= 4


def test_views_do_not_change_when_records_arrive() -> None:
    b = LogBuilder()
    projection = HistoryProjection()
    views: list[tuple[HistoryView, list[Record]]] = []
    for turn in range(5):
        b.prompt(f"q{turn}")
        b.reply_step([(0, "text", f"a{turn}")])
        b.end_turn("end_turn" if turn != 3 else "refusal")
        for record in b.records[len(projection.records) :]:
            projection.append(record)
            view = projection.messages()
            views.append((view, json.loads(json.dumps(list(view)))))
    for view, frozen in views:
        assert list(view) == frozen
    assert views[-1][0][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a4"}],
        "interrupted": False,
    }
    assert views[-1][0][1:3] == list(views[-1][0])[1:3]


# -- real sessions ------------------------------------------------------------------------

# Snapshots of whole sessions that carry their logs (the provider ones carry request bodies).
SNAPSHOTS = sorted(
    p for p in (ROOT / "snapshots").glob("*/*.json") if "logs" in json.loads(p.read_text())
)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_snapshot_session_logs(path: Path) -> None:
    logs = json.loads(path.read_text())["logs"]
    assert logs
    for records in logs:
        assert_equal_after_every_record(records)


REPORT = ["message_count", "last_user_text", "last_assistant_text", "tool_results"]
CYCLE_SCRIPT = {
    "description": "five kinds of turn, again and again (tool call ids repeat)",
    "when_exhausted": "repeat_all",
    "responses": [
        {"events": [{"text": "A plain answer."}]},
        {"events": [{"text": "Let me read."}, {"tool_call": {"id": "call_1", "name": "read"}}]},
        {"events": [{"report": REPORT}]},
        {"events": [{"text": "A long story", "chunk_size": 2}, {"hang": True}]},
        {"events": [{"text": "I can't help."}], "finish": "refusal"},
        {"events": [{"report": REPORT}]},
    ],
}


def checked_reports(records: list[Record]) -> int:
    """Check each report the model gave, and count them.

    A report answers with facts about the request the model received: the
    history the server sent must be the reference derivation of the log at
    that point (its stream/start)."""
    reports = 0
    for i, record in enumerate(records):
        if record["type"] != "assistant/message" or "message_count" not in json.dumps(record):
            continue
        start = max(j for j in range(i) if records[j]["type"] == "stream/start")
        request = ModelRequest(messages=derive_messages(records[:start]))
        said = "".join(b["text"] for b in record["content"] if b["type"] == "text")
        assert said == "\n".join(report_lines(request, REPORT))
        reports += 1
    return reports


@pytest.mark.anyio
async def test_a_real_multi_turn_session(tmp_path: Path) -> None:
    """Through the subprocess: the history each request carried is the reference one."""
    script = write_script(tmp_path, CYCLE_SCRIPT)

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        for turn in range(15):
            stop = turn % 5 == 2  # the story: stop it after two chunks
            result = await client.prompt(
                session, f"prompt {turn}", cancel_after=2 if stop else None, settle=0
            )
            expected = "cancelled" if stop else "refusal" if turn % 5 == 3 else "end_turn"
            assert result.stop_reason == expected

    run = await run_bridge(script, tmp_path / "state", play)
    # No check_logs: the repeated script reuses the call id "call_1", which
    # check_log rejects and derive_messages drops; the projection must agree.
    [records] = run.logs().values()
    projection = assert_equal_after_every_record([r for r in records if r["type"] in MODEL_TYPES])
    assert len(projection.messages()) > 20
    assert checked_reports(records) == 6


COMPACTING_SCRIPT = {
    "description": "answers, a stopped story and reports in a window that compacts often",
    "when_exhausted": "repeat_all",
    "responses": [
        {"events": [{"text": "An answer of a few words, to fill the window a little."}]},
        {"events": [{"text": "A long story " * 20, "chunk_size": 8}, {"hang": True}]},
        {"events": [{"report": REPORT}]},
        {"events": [{"text": "Another answer, a little longer than the first one was."}]},
    ],
}


@pytest.mark.anyio
async def test_a_long_session_that_compacts_again_and_again(tmp_path: Path) -> None:
    """Through the subprocess, in a small window: many compactions, each applied
    to the history the last one left.  The log stays valid, no compaction's
    verbatim part starts before the last one's, the Stop's message survives
    each, and every request carried the reference history of the log."""
    script = write_script(tmp_path, COMPACTING_SCRIPT)

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        for turn in range(48):
            stop = turn % 4 == 1
            result = await client.prompt(
                session, f"prompt number {turn}", cancel_after=3 if stop else None, settle=0
            )
            assert result.stop_reason == ("cancelled" if stop else "end_turn")

    run = await run_bridge(script, tmp_path / "state", play, extra=("--context-window", "1500"))
    [records] = run.logs().values()
    check_log(records)
    done = [r for r in records if r["type"] == "compaction" and r["status"] == "completed"]
    assert len(done) >= 4
    floors = [r["kept_from"] for r in done]
    assert floors == sorted(floors)
    for compaction in done:
        at = records.index(compaction)
        stopped = [r for r in records[:at] if r["type"] == "assistant/message" and r["interrupted"]]
        if not stopped:
            continue  # compacted before the first Stop
        after = derive_messages(records[: at + 1])
        assert any(m["interrupted"] and m["content"] == stopped[-1]["content"] for m in after), (
            stopped[-1]["content"],
            [m for m in after if m["interrupted"]],
            compaction,
        )
    assert_equal_after_every_record([r for r in records if r["type"] in MODEL_TYPES])
    assert checked_reports(records) == 12


def _odd_log(rng: Any, size: int, repeat_seqs: bool) -> list[Record]:
    """Records no agent writes, mixed: late records of old turns, compactions
    with any kept_from and pins, /clear turns that may also regenerate,
    refusals and left-out turns, and (``repeat_seqs``) seqs that repeat."""
    records: list[Record] = []
    turn = 1
    for i in range(size):
        kind = rng.random()
        t = rng.choice([turn, turn, turn, max(1, turn - 1), 1])
        record: Record
        if kind < 0.18:
            texts = [rng.choice(["a", " ", "b c"]) for _ in range(rng.randint(0, 2))]
            record = {
                "type": "user/message",
                "content": [{"type": "text", "text": x} for x in texts],
            }
        elif kind < 0.42:
            blocks: list[Record] = [{"type": "text", "text": rng.choice(["a", " ", "x"])}]
            blocks += [
                {"type": "tool_call", "id": rng.choice(["c1", "c2"]), "name": "t", "input": {}}
                for _ in range(rng.randint(0, 2))
            ]
            rng.shuffle(blocks)
            record = {"type": "assistant/message", "content": blocks}
            record["interrupted"] = rng.random() < 0.3
        elif kind < 0.55:
            record = {
                "type": "tool/result",
                "tool_call_id": rng.choice(["c1", "c2"]),
                "content": [{"type": "text", "text": "r"}],
                "is_error": False,
            }
        elif kind < 0.65:
            record = {"type": "turn/end", "reason": rng.choice(["end_turn", "refusal"])}
            record["left_out"] = rng.random() < 0.15
        elif kind < 0.75:
            turn += 1
            t = turn
            record = {"type": "turn/start"}
            if rng.random() < 0.15:
                record["command"] = "clear"
            if rng.random() < 0.3:
                record["regenerates"] = rng.randint(1, turn)
        else:
            pins = rng.sample(range(i), min(i, rng.randint(0, 3)))
            record = {
                "type": "compaction",
                "status": rng.choice(["completed"] * 6 + ["failed"]),
                "summary": "S",
                "kept_from": rng.randint(0, i),
                "pinned": sorted(pins),
            }
        repeat = repeat_seqs and i > 0 and rng.random() < 0.1
        records.append({**record, "turn": t, "step": 0, "seq": rng.randrange(i) if repeat else i})
    return records


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 40), st.booleans())
@pytest.mark.slow
def test_random_logs_with_compactions_of_any_shape(rng: Any, size: int, repeat: bool) -> None:
    """The compaction shortcut holds, or is not taken, on any log."""
    assert_equal_after_every_record(_odd_log(rng, size, repeat))
