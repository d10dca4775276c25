"""Compaction as a record of the log: the history it derives, the rules a log follows, fork, replay.

The history after a compaction is a pure function of the log (invariant I8):
`derive_messages` and the incremental `HistoryProjection` agree after every
record, every compacted history passes the I3 checker (tool calls paired,
roles legal), the interrupted message of the latest Stop survives, and a fork
reproduces the history of its parent.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.harness import EVENT_LOG_VALIDATOR
from test_history_projection import assert_equal_after_every_record
from test_log_check import (
    ENDINGS,
    WORDS,
    LogBuilder,
    _calls,
    call,
    stream_chunks,
    text,
)

from acp_bridge.compaction.plan import SUMMARY_INSTRUCTION, plan_compaction, summary_messages
from acp_bridge.compaction.shown import compaction_updates
from acp_bridge.log.check import LogInvalid, check_history, check_log
from acp_bridge.log.derive import SUMMARY_HEADER, derive_messages, live_surface, summary_text
from acp_bridge.log.projection import HistoryProjection
from acp_bridge.log.records import MODEL_TYPES
from acp_bridge.log.replay import replay_updates
from acp_bridge.stored.fork import fork_records

Record = dict[str, Any]


def model_records(records: list[Record]) -> list[Record]:
    return [r for r in records if r["type"] in MODEL_TYPES]


def compact(
    b: LogBuilder,
    *,
    keep_tokens: int = 0,
    keep_prompt: bool = True,
    trigger: str = "auto",
    summary: str = "They talked.",
) -> Record | None:
    """Write a compaction the way the loop does (None: nothing to compact)."""
    records = model_records(b.records)
    plan = plan_compaction(live_surface(records), keep_tokens=keep_tokens, keep_prompt=keep_prompt)
    # The loop passes the length of the history it has: the same plan.
    current = len(derive_messages(records))
    assert plan == plan_compaction(
        live_surface(records), keep_tokens=keep_tokens, keep_prompt=keep_prompt, current=current
    )
    if plan is None:
        return None
    cid, attempt = b.new_id("cmp"), b.new_id("att")
    start = b.add(
        "compaction",
        compaction_id=cid,
        attempt=attempt,
        status="in_progress",
        trigger=trigger,
        tokens_before=1000,
    )
    return b.add(
        "compaction",
        compaction_id=cid,
        attempt=attempt,
        status="completed",
        trigger=trigger,
        summary=summary,
        kept_from=start["seq"] if plan.kept_from is None else plan.kept_from,
        pinned=list(plan.pinned),
        replaced=plan.replaced,
        tokens_before=1000,
        tokens_after=100,
        usage=None,
    )


def summary_message(summary: str = "They talked.") -> Record:
    return {
        "role": "user",
        "content": [{"type": "text", "text": summary_text(summary)}],
        "interrupted": False,
    }


def three_turns() -> LogBuilder:
    b = LogBuilder()
    b.prompt("first question")
    b.tool_step([(0, "text", "Let me read.")], [call("call_1", path="a.txt")])
    b.end_step("tool_use")
    b.reply_step([(0, "text", "It says hello.")])
    b.end_turn("end_turn")
    b.prompt("second question")
    b.start_step()
    attempt = b.stream([(0, "text", "A long ans"), (0, "text", "wer that")])
    b.interrupt(attempt, [(0, "text", "A long ans"), (0, "text", "wer that")])
    b.prompt("third question")
    return b


# -- the derived history ----------------------------------------------------------------


def test_a_compaction_replaces_what_came_before_with_its_summary() -> None:
    b = three_turns()
    done = compact(b)
    assert done is not None
    check_log(b.records)
    history = derive_messages(b.records)
    # The summary, the pinned interrupted message of the Stop, the pinned prompt.
    assert history == [
        summary_message(),
        {"role": "assistant", "content": [text("A long answer that")], "interrupted": True},
        {"role": "user", "content": [text("third question")], "interrupted": False},
    ]
    assert history[0]["content"][0]["text"].startswith(SUMMARY_HEADER)
    # What follows the compaction is verbatim.
    b.reply_step([(0, "text", "Third answer.")])
    b.end_turn("end_turn")
    assert derive_messages(b.records)[-1]["content"] == [text("Third answer.")]
    check_log(b.records)


def test_a_tail_that_fits_is_kept_verbatim_and_pairs_stay_whole() -> None:
    b = three_turns()
    b.tool_step([(0, "text", "Reading b.")], [call("call_2", path="b.txt")])
    b.end_step("tool_use")
    done = compact(b, keep_tokens=100)
    assert done is not None
    history = derive_messages(b.records)
    check_history(history)
    # The tail starts at the assistant message that called the tool: its
    # result stays with it.
    assert history[-2]["content"][-1]["type"] == "tool_call"
    assert history[-1]["content"][0]["type"] == "tool_result"
    kept = next(r for r in b.records if r["seq"] == done["kept_from"])
    assert kept["type"] in ("user/message", "assistant/message")


def test_a_later_compaction_supersedes_an_earlier_one() -> None:
    b = three_turns()
    assert compact(b, summary="First summary.") is not None
    b.reply_step([(0, "text", "Third answer.")])
    b.end_turn("end_turn")
    b.prompt("fourth question")
    assert compact(b, summary="Second summary.") is not None
    history = derive_messages(b.records)
    assert "First summary." not in json.dumps(history)
    assert history[0] == summary_message("Second summary.")
    # The interrupted message of the latest Stop is still there (I8).
    assert {"role": "assistant", "content": [text("A long answer that")], "interrupted": True} in (
        history
    )
    check_log(b.records)


def stop_then_compact_inside_a_tool_turn() -> tuple[LogBuilder, Record]:
    """A Stop, then a compaction inside a tool turn: it pins the stopped
    message and the prompt, and summarizes the tool step between them."""
    b = LogBuilder()
    b.prompt("q1")
    b.start_step()
    long = [(0, "text", "A" * 4000)]
    b.interrupt(b.stream(long), long)
    b.prompt("q2")
    b.tool_step([(0, "text", "Reading.")], [call("call_1", path="a.txt")])
    b.end_step("tool_use")
    first = compact(b, summary="First summary.")
    assert first is not None
    b.reply_step([(0, "text", "Answer two.")])
    b.end_turn("end_turn")
    b.prompt("q3")
    b.start_step()
    b.interrupt(b.stream([(0, "text", "B")]), [(0, "text", "B")])
    b.prompt("q4")
    return b, first


def test_a_later_compaction_brings_back_nothing_an_earlier_one_summarized() -> None:
    b, first = stop_then_compact_inside_a_tool_turn()
    assert len(first["pinned"]) == 2  # the stopped message and the prompt q2
    # Every budget, up to keeping all but the first summary and the long
    # stopped message: the tail may reach the pinned prompt q2, but must not
    # start there (kept_from would then take back the summarized tool step).
    for keep in range(1, 400, 4):
        trial = copy.deepcopy(b)
        second = compact(trial, keep_tokens=keep, summary="Second summary.")
        assert second is not None
        assert second["kept_from"] >= first["kept_from"], keep
        history = json.dumps(derive_messages(trial.records))
        assert "call_1" not in history, keep
        assert "Reading." not in history, keep
        check_log(trial.records)
        assert_equal_after_every_record(model_records(trial.records))


def test_the_projection_agrees_with_any_compaction_after_a_compaction() -> None:
    """Compactions the loop would not plan: the projection applies them to the
    whole log as derive_messages does (its shortcut does not hold for them)."""
    b, _ = stop_then_compact_inside_a_tool_turn()
    call_seq = next(
        r["seq"]
        for r in b.records
        if r["type"] == "assistant/message" and ("call_1" in json.dumps(r["content"]))
    )
    for fields in (
        {"kept_from": call_seq, "pinned": []},  # below the first one's kept_from
        {"kept_from": b.records[-1]["seq"], "pinned": [call_seq]},  # pins a summarized record
    ):
        trial = copy.deepcopy(b)
        cid, attempt = trial.new_id("cmp"), trial.new_id("att")
        common = {"compaction_id": cid, "attempt": attempt, "trigger": "auto"}
        trial.add("compaction", status="in_progress", tokens_before=1, **common)
        trial.add(
            "compaction",
            status="completed",
            summary="Odd.",
            replaced=1,
            tokens_before=1,
            tokens_after=1,
            usage=None,
            **fields,
            **common,
        )
        assert "Reading." in json.dumps(derive_messages(trial.records))  # the whole log's rule
        assert_equal_after_every_record(model_records(trial.records))


class Summarized(dict[str, Any]):
    """A record a compaction summarized: reading it fails the test."""

    def get(self, *args: Any) -> Any:
        raise AssertionError(f"read a summarized record: {dict(self)}")

    __getitem__ = get


def test_a_second_compaction_reads_only_the_current_history() -> None:
    """What the first compaction summarized is never read again: planning the
    second, the history it leaves, and the projection after it."""
    b = three_turns()
    first = compact(b, summary="First summary.")
    assert first is not None
    records = model_records(b.records)
    projection = HistoryProjection()
    for record in records:
        projection.append(record)
    kept = {id(record) for record in projection.surface().records}
    position = records.index(first)
    summarized = 0
    for index, record in enumerate(projection.records[:position]):
        if id(record) not in kept:
            projection.records[index] = Summarized(record)
            summarized += 1
    assert summarized >= 4
    for turn in range(3):
        b.reply_step([(0, "text", f"Answer {turn}.")])
        b.end_turn("end_turn")
        b.prompt(f"question {turn}")
        for record in model_records(b.records)[len(projection.records) :]:
            projection.append(record)
        plan = plan_compaction(projection.surface(), keep_tokens=10, keep_prompt=True)
        assert plan is not None
        done = compact(b, keep_tokens=10, summary=f"Summary {turn}.")
        assert done is not None
        assert done["pinned"] == list(plan.pinned)
        assert projection.messages_after(done) == derive_messages(b.records)
        projection.append(done)
        assert list(projection.messages()) == derive_messages(b.records)


def test_nothing_to_compact_when_only_a_summary_and_pins_would_go() -> None:
    b = LogBuilder()
    b.prompt("only question")
    assert compact(b) is None  # the prompt is pinned: nothing else
    assert compact(b, keep_prompt=False) is not None
    assert compact(b, keep_prompt=False) is None  # only the summary would be summarized


def test_a_failed_or_cancelled_compaction_changes_nothing() -> None:
    b = three_turns()
    before = derive_messages(b.records)
    for status, extra in (
        ("failed", {"error": {"kind": "server", "message": "x"}}),
        ("cancelled", {}),
    ):
        cid, attempt = b.new_id("cmp"), b.new_id("att")
        common = {"compaction_id": cid, "attempt": attempt, "trigger": "auto"}
        b.add("compaction", status="in_progress", tokens_before=1, **common)
        b.add("compaction", status=status, **common, **extra)
    check_log(b.records)
    assert derive_messages(b.records) == before


def test_a_left_out_turn_is_not_in_the_history() -> None:
    b = LogBuilder()
    b.prompt("q1")
    b.reply_step([(0, "text", "a1")])
    b.end_turn("end_turn")
    b.prompt("a prompt far too long")
    b.add("turn/end", reason="error", forced=False, left_out=True)
    b.prompt("q3")
    check_log(b.records)
    assert "far too long" not in json.dumps(derive_messages(b.records))
    assert_equal_after_every_record(b.records)


def test_the_summary_request_ends_with_the_instruction() -> None:
    b = three_turns()
    plan = plan_compaction(live_surface(model_records(b.records)), keep_tokens=0, keep_prompt=True)
    assert plan is not None
    messages = summary_messages(plan.summarized, "focus on the files")
    check_history(messages)
    last = messages[-1]["content"][-1]["text"]
    assert last.startswith(SUMMARY_INSTRUCTION)
    assert last.endswith("with these instructions: focus on the files")
    # Everything before the boundary is summarized, the pinned prompt too.
    assert "third question" in json.dumps(messages)


# -- the log's rules ----------------------------------------------------------------------


def _bad(records: list[Record], match: str) -> None:
    with pytest.raises(LogInvalid, match=match):
        check_log(records)


def test_check_log_rejects_a_compaction_out_of_place() -> None:
    b = three_turns()
    done = compact(b)
    assert done is not None
    good = b.records
    # An outcome with no compaction in progress.
    b1 = LogBuilder()
    b1.prompt("q")
    b1.add("compaction", compaction_id="c", attempt="a", status="cancelled", trigger="auto")
    _bad(b1.records, "not in progress")
    # A pinned seq that is not a message.
    bad = copy.deepcopy(good)
    bad[-1]["pinned"] = [bad[-1]["seq"] - 1]
    _bad(bad, "is not a message before kept_from")
    # kept_from after the compaction itself.
    bad = copy.deepcopy(good)
    bad[-1]["kept_from"] = bad[-1]["seq"] + 1
    _bad(bad, "kept_from")
    # A step while the compaction is in progress.
    bad = copy.deepcopy(good[:-1])
    b2 = LogBuilder()
    b2.records, b2.turn, b2.step = bad, b.turn, b.step
    b2.start_step()
    _bad(b2.records, "while compaction")
    # A compaction while a step is open.
    b3 = LogBuilder()
    b3.prompt("q")
    b3.start_step()
    b3.add("compaction", compaction_id="c", attempt="a", status="in_progress", trigger="auto")
    _bad(b3.records, "while step 1 is open")


def test_the_schema_accepts_compaction_records() -> None:
    b = three_turns()
    compact(b)
    for record in b.records:
        assert EVENT_LOG_VALIDATOR.is_valid(record), record
    done = b.records[-1]
    assert not EVENT_LOG_VALIDATOR.is_valid({**done, "summary": ""})
    assert not EVENT_LOG_VALIDATOR.is_valid({k: v for k, v in done.items() if k != "kept_from"})
    assert not EVENT_LOG_VALIDATOR.is_valid({**done, "status": "done"})


# -- property tests ------------------------------------------------------------------------


def _random_session(data: st.DataObject, *, arbitrary: bool) -> LogBuilder:
    """Random valid turns with compactions between steps (planned, or ``arbitrary``:
    any kept_from and any earlier messages pinned)."""
    b = LogBuilder()

    def maybe_compact() -> None:
        if data.draw(st.integers(0, 2)) != 0:
            return
        if not arbitrary:
            compact(
                b,
                keep_tokens=data.draw(st.sampled_from([0, 20, 80, 400])),
                keep_prompt=data.draw(st.booleans()),
            )
            return
        cid, attempt = b.new_id("cmp"), b.new_id("att")
        common = {"compaction_id": cid, "attempt": attempt, "trigger": "auto"}
        start = b.add("compaction", status="in_progress", **common)
        kept_from = data.draw(st.integers(0, start["seq"]))
        messages = [
            r["seq"]
            for r in b.records
            if r["type"] in ("user/message", "assistant/message") and r["seq"] < kept_from
        ]
        pinned = sorted(data.draw(st.sets(st.sampled_from(messages)))) if messages else []
        b.add(
            "compaction",
            status="completed",
            summary=data.draw(st.sampled_from(["S", "sum mary"])),
            kept_from=kept_from,
            pinned=pinned,
            replaced=1,
            tokens_after=1,
            **common,
        )

    for _ in range(data.draw(st.integers(1, 6))):
        b.prompt(*data.draw(st.lists(WORDS, min_size=1, max_size=2)))
        maybe_compact()
        for _ in range(data.draw(st.integers(0, 2))):
            b.tool_step(data.draw(stream_chunks(max_blocks=2)), _calls(b, data))
            b.end_step("tool_use")
            maybe_compact()
        data.draw(st.sampled_from(ENDINGS))(b, data)
    return b


@settings(max_examples=200, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_every_planned_compaction_leaves_a_valid_history(data: st.DataObject) -> None:
    b = _random_session(data, arbitrary=False)
    check_log(b.records)  # runs check_history(derive_messages(...)) too
    cut = data.draw(st.integers(0, len(b.records)))
    check_log(b.records[:cut])
    # The interrupted message of the latest Stop survives every compaction (I8).
    for index, record in enumerate(b.records):
        if record["type"] != "compaction" or record["status"] != "completed":
            continue
        if not any(m["interrupted"] for m in derive_messages(b.records[:index])):
            continue  # no Stop in the history (or its message merged away)
        stop = [
            r
            for r in b.records[:index]
            if r["type"] == "assistant/message" and r["interrupted"] is True
        ][-1]
        after = derive_messages(b.records[: index + 1])
        # Nothing an earlier compaction summarized comes back.
        kept = {r.get("seq") for r in live_surface(b.records[: index + 1]).records} - {None}
        assert kept <= {r.get("seq") for r in live_surface(b.records[:index]).records}
        assert any(
            m["interrupted"] and all(block in m["content"] for block in stop["content"])
            for m in after
        ), (stop, after)


@settings(max_examples=200, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_any_compaction_record_derives_a_valid_history(data: st.DataObject) -> None:
    b = _random_session(data, arbitrary=True)
    check_log(b.records)
    check_history(derive_messages(b.records))


@settings(max_examples=100, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_the_projection_follows_compactions(data: st.DataObject) -> None:
    b = _random_session(data, arbitrary=data.draw(st.booleans()))
    assert_equal_after_every_record(model_records(b.records))


# -- fork and replay ------------------------------------------------------------------


def test_a_fork_after_a_compaction_has_the_same_history() -> None:
    b = three_turns()
    b.tool_step([(0, "text", "Reading b.")], [call("call_2", path="b.txt")])
    b.end_step("tool_use")
    assert compact(b, keep_tokens=100) is not None
    b.reply_step([(0, "text", "Done.")])
    b.end_turn("end_turn")
    # Records of a type this version does not know are skipped when a log is
    # read, and their seqs still count: the fork numbers its records anew.
    parent = b.records[:1] + [{**r, "seq": r["seq"] + 5} for r in b.records[1:]]
    for r in parent:
        if r["type"] == "compaction" and "kept_from" in r:
            r["kept_from"] += 5
            r["pinned"] = [seq + 5 for seq in r["pinned"]]
    forked = fork_records(parent, session_id="sess_fork", cwd="/p", upto_turn=None, at=1.0)
    assert [r["seq"] for r in forked] == list(range(len(forked)))
    check_log(forked)
    assert derive_messages(forked) == derive_messages(b.records)


def test_replay_shows_each_compaction_once() -> None:
    b = three_turns()
    done = compact(b)
    assert done is not None
    plain = [u["update"] for u in replay_updates(b.records)]
    notices = [u for u in plain if (u.get("_meta") or {}).get("acpBridge", {}).get("compaction")]
    assert len(notices) == 1
    assert notices[0]["sessionUpdate"] == "agent_thought_chunk"
    assert "replaced by a summary" in notices[0]["content"]["text"]
    shown = [u["update"] for u in replay_updates(b.records, compaction=True)]
    updates = [u for u in shown if u["sessionUpdate"] == "compaction_update"]
    assert updates == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": done["compaction_id"],
            "status": "completed",
            "summary": [{"type": "text", "text": "They talked."}],
        }
    ]
    # Live, the in_progress record is shown first to a client that opted in.
    start = next(r for r in b.records if r.get("status") == "in_progress")
    assert compaction_updates(start, opted=True)[0]["status"] == "in_progress"
    assert compaction_updates(start, opted=False) == []


def test_a_compact_command_turn_replays_its_answer() -> None:
    b = LogBuilder()
    b.prompt("q")
    b.reply_step([(0, "text", "a")])
    b.end_turn("end_turn")
    b.turn += 1
    b.add("turn/start", command="compact", prompt=[text("/compact")])
    b.end_turn("end_turn")
    check_log(b.records)
    shown = [u["update"] for u in replay_updates(b.records)]
    assert shown[-2] == {"sessionUpdate": "user_message_chunk", "content": text("/compact")}
    assert shown[-1]["sessionUpdate"] == "agent_message_chunk"
    assert shown[-1]["content"]["text"].startswith("Nothing to compact")
