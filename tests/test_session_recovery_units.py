"""Reopening, upcasting, locking and regenerating, on logs in memory and on disk.

The stored fixture ``fixtures/log-v1.jsonl`` is a log of format version 1 as
acp-bridge writes it (a stopped turn, a tool call with usage, a regenerate, a
provider error).  It must keep loading to the same history in every later
version: when the format changes, an upcaster makes it so.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.harness import EVENT_LOG_VALIDATOR

from acp_bridge.log import upcast as upcast_module
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import delivered_prefix, derive_messages, replaced_turns
from acp_bridge.log.open_turn import OUTCOME_UNKNOWN
from acp_bridge.log.reader import LogCorrupt, read_records
from acp_bridge.log.reopen import closing_records
from acp_bridge.log.replay import replay_updates
from acp_bridge.log.upcast import load_log, upcast
from acp_bridge.log.writer.files import LogFiles
from acp_bridge.log.writer.lock import SessionLocked
from acp_bridge.providers.notes import CRASHED_NOTE, INTERRUPTED_NOTE
from acp_bridge.providers.sent import sent_messages
from acp_bridge.stored.fork import ForkError, fork_records

FIXTURE = Path(__file__).parent / "fixtures" / "log-v1.jsonl"

Json = dict[str, Any]


def closed(records: list[Json]) -> list[Json]:
    """``records`` with the closing records appended as `reopen` writes them."""
    out = list(records)
    seq = len(records)
    for kind, turn, step, fields in closing_records(records):
        out.append(
            {"v": 1, "seq": seq, "at": 0.0, "type": kind, "turn": turn, "step": step, **fields}
        )
        seq += 1
    return out


# -- the stored log of today's format --------------------------------------------------


def test_the_stored_v1_log_loads_to_its_history() -> None:
    loaded = load_log(FIXTURE)
    assert loaded.records == read_records(FIXTURE)
    for record in loaded.records:
        assert [e.message for e in EVENT_LOG_VALIDATOR.iter_errors(record)] == []
    assert loaded.next_seq == len(loaded.records) == 51
    assert not loaded.torn
    check_log(loaded.records)
    history = derive_messages(loaded.records)
    assert [(m["role"], m["interrupted"]) for m in history] == [
        ("user", False),
        ("assistant", True),
        ("user", False),
        ("assistant", False),
        ("user", False),
    ]
    assert history[1]["content"] == [
        {"type": "reasoning", "text": "Keep it short."},
        {"type": "text", "text": "Once upon a time,"},
    ]
    # Turn 3 regenerated turn 2: the tool call and its answer are replaced.
    assert history[3]["content"] == [{"type": "text", "text": "A second attempt."}]
    assert replaced_turns(loaded.records) == {2}


def test_an_upcaster_raises_an_older_log_to_the_current_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pretend version 2 exists: the v1 fixture is upcast record by record."""

    def v1_to_v2(record: Json) -> Json:
        out = {**record, "v": 2}
        if out["type"] == "session/start":
            out["renamed_cwd"] = out.pop("cwd")
        return out

    monkeypatch.setitem(upcast_module.UPCASTERS, 1, v1_to_v2)
    loaded = load_log(FIXTURE, current=2)
    assert {r["v"] for r in loaded.records} == {2}
    assert loaded.records[0]["renamed_cwd"] == "/home/user/project"
    assert derive_messages(loaded.records) == derive_messages(read_records(FIXTURE))
    with pytest.raises(ValueError, match="newer than this acp-bridge"):
        upcast({"v": 3, "type": "turn/start"}, current=2)
    monkeypatch.delitem(upcast_module.UPCASTERS, 1)
    with pytest.raises(LogCorrupt, match="no upcaster for format version 1"):
        load_log(FIXTURE, current=2)


def test_read_records_upcasts_like_load_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """The public reader sits on the one that upcasts: the day format 2 exists,
    ``read_records`` still reads every v1 log (raised to v2), records of
    unknown types included."""

    def v1_to_v2(record: Json) -> Json:
        return {**record, "v": 2}

    v1 = read_records(FIXTURE)
    monkeypatch.setitem(upcast_module.UPCASTERS, 1, v1_to_v2)
    monkeypatch.setattr(upcast_module, "FORMAT_VERSION", 2)
    records = read_records(FIXTURE)
    assert {r["v"] for r in records} == {2}
    assert records == [{**r, "v": 2} for r in v1]


def test_unknown_record_types_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = read_records(FIXTURE)
    extra = {"v": 1, "seq": 11, "at": 0.0, "type": "future/thing", "turn": 1, "step": 0}
    shifted = records[:11] + [extra] + [{**r, "seq": r["seq"] + 1} for r in records[11:]]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in shifted))
    with caplog.at_level(logging.WARNING, "acp_bridge.log"):
        loaded = load_log(path)
    assert caplog.text.count("unknown type") == 1
    assert "unknown type 'future/thing'" in caplog.text
    assert loaded.next_seq == 52
    assert derive_messages(loaded.records) == derive_messages(records)


# -- closing a turn left open ----------------------------------------------------------


@pytest.mark.parametrize("cut", range(1, 52))
def test_every_cut_of_a_log_is_closed_into_a_valid_log(cut: int) -> None:
    """A crash after any record: the closed log passes the checker (I3), and an
    open stream's delivered text is kept as an interrupted message (I2)."""
    records = read_records(FIXTURE)[:cut]
    repaired = closed(records)
    check_log(repaired)
    ends = [r for r in repaired if r["type"] == "turn/end"]
    if records[-1]["type"] != "turn/end" and cut > 1:
        assert ends[-1]["forced"] is True
        assert ends[-1]["reason"] in ("crashed", "cancelled")
    for record in repaired[cut:]:
        if record["type"] == "assistant/message":
            prefix = delivered_prefix(records, record["attempt"])
            texts = [b["text"] for b in record["content"]]
            assert texts == [t for (_, kind), t in prefix.items() if kind != "tool_args"]
            assert record["recovered"] == "crashed"


def test_a_crash_mid_stream_keeps_the_delivered_text() -> None:
    records = read_records(FIXTURE)[:7]  # turn 1's deltas, before the stop was recorded
    repaired = closed(records)
    kinds = [(r["type"], r.get("reason") or r.get("outcome")) for r in repaired[7:]]
    assert kinds == [
        ("assistant/message", None),
        ("stream/end", "committed"),
        ("step/end", "crashed"),
        ("turn/end", "crashed"),
    ]
    history = derive_messages(repaired)
    assert history[-1]["interrupted"] is True
    assert history[-1]["crashed"] is True
    # The model is told the agent stopped, not that the user did.
    follow = {"role": "user", "content": [{"type": "text", "text": "Go on"}], "interrupted": False}
    assert sent_messages([*history, follow])[-1]["content"][0]["text"] == CRASHED_NOTE
    replayed = [u["update"] for u in replay_updates(repaired)]
    marks = [u["_meta"]["acpBridge"] for u in replayed if "_meta" in u]
    assert marks
    assert all(mark == {"interrupted": True, "crashed": True} for mark in marks)


def test_a_dispatched_tool_call_without_result_gets_an_honest_one() -> None:
    records = read_records(FIXTURE)[:22]  # tool/call written, no tool/result yet
    repaired = closed(records)
    (result,) = [r for r in repaired[22:] if r["type"] == "tool/result"]
    assert result["is_error"] is True
    assert result["content"] == [{"type": "text", "text": OUTCOME_UNKNOWN}]
    (update,) = [r for r in repaired[22:] if r["type"] == "tool/update"]
    assert update["update"]["status"] == "failed"
    check_log(repaired)


def test_a_crash_while_a_stop_was_recorded_completes_the_stop() -> None:
    records = read_records(FIXTURE)[:8]  # the interrupted message, no stream/end yet
    repaired = closed(records)
    assert [r.get("reason") for r in repaired if r["type"] == "turn/end"] == ["cancelled"]
    check_log(repaired)
    # The user's Stop it was: the model is told so.
    history = derive_messages(repaired)
    assert history[-1]["interrupted"] is True
    assert "crashed" not in history[-1]
    follow = {"role": "user", "content": [{"type": "text", "text": "Go on"}], "interrupted": False}
    assert sent_messages([*history, follow])[-1]["content"][0]["text"] == INTERRUPTED_NOTE


def test_an_ended_log_needs_no_closing() -> None:
    assert closing_records(read_records(FIXTURE)) == []


# -- reopening a file ------------------------------------------------------------------


def test_reopen_cuts_a_torn_line_and_continues_seq(tmp_path: Path) -> None:
    from acp_bridge.log.reopen import reopen
    from acp_bridge.transport.outbox import Outbox

    path = tmp_path / "sess_x.jsonl"
    data = FIXTURE.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(data[:7]) + b"\n" + data[7][:40])  # torn mid-record
    read_fd, write_fd = os.pipe()
    try:
        outbox = Outbox(write_fd)
        reopened = reopen(str(path), outbox)
        assert reopened.torn
        assert [r["seq"] for r in reopened.closed] == [7, 8, 9, 10]
        outbox.flush_now()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    records = read_records(path)
    check_log(records)
    assert records[-1]["type"] == "turn/end"
    assert os.path.getsize(path) == sum(len(orjson.dumps(r)) + 1 for r in records)


# -- the lock ----------------------------------------------------------------------------


def test_a_second_lock_on_a_session_is_refused(tmp_path: Path) -> None:
    log_path = tmp_path / "sess_a.jsonl"
    log_path.write_bytes(b"")
    first, second = LogFiles(), LogFiles()
    held = first.claim(str(log_path))
    with pytest.raises(SessionLocked, match=f"process {os.getpid()}"):
        second.claim(str(log_path))
    first.release(held)
    second.release(second.claim(str(log_path)))


# -- forks ---------------------------------------------------------------------------------


def test_a_fork_at_a_stopped_turn_holds_its_interrupted_message(tmp_path: Path) -> None:
    records = read_records(FIXTURE)
    fork = fork_records(records, session_id="sess_new", cwd="/elsewhere", upto_turn=1, at=1.0)
    assert fork[0]["parent"] == {"session_id": records[0]["session_id"], "turn": 1}
    assert EVENT_LOG_VALIDATOR.is_valid(fork[0])
    assert [r["seq"] for r in fork] == list(range(len(fork)))
    check_log(fork)
    assert derive_messages(fork) == derive_messages(records[:11])
    whole = fork_records(records, session_id="sess_new", cwd="/x", upto_turn=None, at=1.0)
    assert derive_messages(whole) == derive_messages(records)
    with pytest.raises(ForkError, match="turn 9 has not ended"):
        fork_records(records, session_id="sess_new", cwd="/x", upto_turn=9, at=1.0)


def test_regenerate_twice_keeps_only_the_newest_attempt() -> None:
    records = read_records(FIXTURE)[:41]  # up to the end of turn 3 (a regenerate of 2)
    second = [
        {
            "v": 1,
            "seq": 41,
            "at": 0.0,
            "type": "turn/start",
            "turn": 4,
            "step": 0,
            "regenerates": 2,
        },
        {
            "v": 1,
            "seq": 42,
            "at": 0.0,
            "type": "turn/end",
            "turn": 4,
            "step": 0,
            "reason": "cancelled",
            "forced": False,
        },
    ]
    assert replaced_turns(records + second) == {2, 3}
    history = derive_messages(records + second)
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    check_log(records + second)


def test_the_fixture_is_not_modified_by_loading(tmp_path: Path) -> None:
    copy = tmp_path / "copy.jsonl"
    shutil.copy(FIXTURE, copy)
    load_log(copy)
    assert copy.read_bytes() == FIXTURE.read_bytes()
