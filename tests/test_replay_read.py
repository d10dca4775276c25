"""`read_for_replay` (what ``session/load`` reads) replays exactly what the log's records do.

It parses a log a slice at a time and folds runs of one-part text deltas into
`DeltaRun` items.  These tests hold its replay, bytes and updates, to the
replay of the records `load_log` reads, on random logs written to a file
(odd deltas among them: several parts, a text or attempt that is not a
string, a turn that is not an integer, no parts, unicode and escapes, lines
spaced as a hand edit would), cut in slices of a few lines; hold that it
leaves to `load_log` every file that needs more than a glance; and, through
the real subprocess, that a long session with such lines loads with the
updates of its records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_replay_frames import random_log

from acp_bridge.log import replay_read
from acp_bridge.log.reader import read_records
from acp_bridge.log.replay import replay_frames, replay_updates, without_deltas
from acp_bridge.log.replay_read import DeltaRun, read_for_replay
from acp_bridge.log.upcast import load_log
from acp_bridge.protocol.frames import UpdateFrames
from acp_bridge.testing import NO_CAPABILITIES, AgentLauncher

Record = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent


def as_file(
    records: list[Record], path: Path, spaced: set[int] | frozenset[int] = frozenset()
) -> Path:
    """The records as a log file (with ``v``, ``seq``, ``at``, ``step``); the
    lines of ``spaced`` written with spaces, as an editor would."""
    lines = []
    for seq, record in enumerate(records):
        full = {"v": 1, "seq": seq, "at": 1.7e9 + seq, "step": 1, "turn": 0} | record
        if seq in spaced:
            lines.append(orjson.dumps(full, option=orjson.OPT_INDENT_2).replace(b"\n", b" "))
        else:
            lines.append(orjson.dumps(full))
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def assert_same_replay(path: Path) -> None:
    records = load_log(path).records
    read = read_for_replay(path)
    assert read is not None
    loaded, items = read
    assert loaded.records == [item for item in items if not isinstance(item, DeltaRun)]
    assert loaded.next_seq == len(records)
    assert loaded.valid_size == path.stat().st_size
    others = without_deltas(loaded.records)
    assert others == without_deltas(records)
    frames = UpdateFrames("sess_r")
    for compaction in (False, True):
        expected = replay_frames(records, frames.update, compaction=compaction)
        got = replay_frames(items, frames.update, others=others, compaction=compaction)
        assert got == expected
        assert replay_updates(items, compaction=compaction) == replay_updates(
            records, compaction=compaction
        )


odd_deltas: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"parts": [[0, "text", "a"], [1, "reasoning", "b"]]},
        {"parts": [[0, "text", 5]]},
        {"parts": [[0, "other", "an unknown kind"]]},
        {"parts": []},
        {},
        {"turn": 1.0, "parts": [[0, "text", "float turn"]]},
        {"attempt": None, "parts": [[0, "text", "no attempt"]]},
        {"parts": [[0, "text", 'caf\u00e9 \\u00e9 "q" \x01 \ud7ff \U0001f600']]},
    ]
)


@st.composite
def log_with_odd_lines(draw: st.DrawFn) -> tuple[list[Record], set[int]]:
    records = draw(random_log())
    for _ in range(draw(st.integers(0, 3))):
        deltas = [i for i, r in enumerate(records) if r["type"] == "stream/delta"]
        if not deltas:
            break
        at = draw(st.sampled_from(deltas))
        records[at] = {**records[at], **draw(odd_deltas)}
    spaced = draw(st.sets(st.integers(0, len(records) - 1), max_size=3))
    return records, spaced


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(log_with_odd_lines(), st.sampled_from([1, 64, 1 << 20]))
def test_a_folded_log_replays_as_its_records(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    drawn: tuple[list[Record], set[int]],
    slice_bytes: int,
) -> None:
    monkeypatch.setattr(replay_read, "SLICE_BYTES", slice_bytes)
    records, spaced = drawn
    assert_same_replay(as_file(records, tmp_path / "log.jsonl", spaced))


def test_a_long_log_is_folded_into_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from bench.load_bench import synthetic_log

    path = tmp_path / "long.jsonl"
    records = synthetic_log("sess_long", 5000)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert_same_replay(path)
    read = read_for_replay(path)
    assert read is not None
    runs = [item for item in read[1] if isinstance(item, DeltaRun)]
    # Every delta folded: a run of reasoning and one of text per reply.
    assert sum(len(run.texts) for run in runs) == sum(r["type"] == "stream/delta" for r in records)
    assert {run.kind for run in runs} == {"reasoning", "text"}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[:-5], id="torn tail"),
        pytest.param(lambda data: data.replace(b"\n", b"\n\n", 1), id="blank line"),
        pytest.param(lambda data: data.replace(b'"v":1', b'"v":0', 1), id="older version"),
        pytest.param(lambda data: data.replace(b'"seq":3,', b'"seq":4,', 1), id="seq gap"),
        pytest.param(
            lambda data: data.replace(b'"type":"turn/end"', b'"type":"turn/later"', 1),
            id="unknown type",
        ),
        pytest.param(lambda data: data.replace(b'"seq":2,', b'"seq":true,', 1), id="bool seq"),
    ],
)
def test_a_log_that_needs_more_than_a_glance_is_left_to_load_log(
    tmp_path: Path, damage: Any
) -> None:
    records: list[Record] = [
        {"type": "session/start", "session_id": "sess_r"},
        {"type": "turn/start", "turn": 1},
        {"type": "stream/start", "turn": 1, "attempt": "att_a", "message_id": "m"},
        {"type": "stream/delta", "turn": 1, "attempt": "att_a", "parts": [[1, "text", "x"]]},
        {"type": "turn/end", "turn": 1, "reason": "end_turn"},
    ]
    path = as_file(records, tmp_path / "log.jsonl")
    assert read_for_replay(path) is not None
    path.write_bytes(damage(path.read_bytes()))
    assert read_for_replay(path) is None


@pytest.mark.parametrize("slice_bytes", [1, 2, 7, 64, 1 << 20])
@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[:-1], id="no last newline"),
        pytest.param(lambda data: data[:-7], id="torn tail"),
        pytest.param(lambda data: b"\n" + data, id="blank first line"),
        pytest.param(lambda data: data.replace(b"}\n", b"}\n\n", 2), id="blank line"),
        pytest.param(lambda data: data + b"\n", id="blank last line"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: b"\n", id="a newline"),
    ],
)
def test_a_file_read_a_slice_at_a_time_leaves_odd_lines_to_load_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any, slice_bytes: int
) -> None:
    """The file is read a slice of about `SLICE_BYTES` at a time, wherever the
    slices end: a blank or torn line is still found, and left to `load_log`."""
    monkeypatch.setattr(replay_read, "SLICE_BYTES", slice_bytes)
    records: list[Record] = [
        {"type": "session/start", "session_id": "sess_r"},
        {"type": "turn/start", "turn": 1},
        {"type": "stream/delta", "turn": 1, "attempt": "att_a", "parts": [[1, "text", "x"]]},
        {"type": "turn/end", "turn": 1, "reason": "end_turn"},
    ]
    path = as_file(records, tmp_path / "log.jsonl")
    read = read_for_replay(path)
    assert read is not None
    assert read[0].valid_size == path.stat().st_size
    assert read[0].next_seq == len(records)
    path.write_bytes(damage(path.read_bytes()))
    assert read_for_replay(path) is None


# -- through the agent ---------------------------------------------------------------


def odd_lines(records: list[Record]) -> list[bytes]:
    """The log's lines, some of its deltas written as no bridge writes them
    (but as a hand edit might): several parts, escapes orjson does not use,
    spaces, a text that is not a string."""
    lines = [orjson.dumps(r) for r in records]
    deltas = [i for i, r in enumerate(records) if r["type"] == "stream/delta"]
    multi, escaped, spaced, number = deltas[7], deltas[30], deltas[55], deltas[81]
    two = dict(records[multi])
    two["parts"] = [[0, "reasoning", "both "], [1, "text", "in one record "]]
    lines[multi] = orjson.dumps(two)
    lines[escaped] = lines[escaped].replace(b"piece", b"\\u0070i\\u00e9ce \\/ \\\\", 1)
    lines[spaced] = orjson.dumps(records[spaced], option=orjson.OPT_INDENT_2).replace(b"\n", b" ")
    num = dict(records[number])
    num["parts"] = [[1, "text", 42]]
    lines[number] = orjson.dumps(num)
    return lines


def write_long_session(state_dir: Path, session_id: str, cwd: Path) -> list[dict[str, Any]]:
    """A long session's log with odd lines; the updates its records replay to."""
    from bench.load_bench import synthetic_log

    records = synthetic_log(session_id, 4000, str(cwd))
    path = state_dir / "sessions" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"".join(line + b"\n" for line in odd_lines(records)))
    return [u["update"] for u in replay_updates(read_records(path))]


@pytest.mark.anyio
async def test_a_long_session_loads_with_the_updates_of_its_records(
    acp_agent: AgentLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    session_id = "sess_long_load"
    expected = write_long_session(acp_agent.state_dir, session_id, acp_agent.workspace)
    # About one per reply (a message's batches replay joined), the odd lines apart.
    assert sum(u["sessionUpdate"] == "agent_message_chunk" for u in expected) > 100
    async with acp_agent.bridge() as agent:
        await agent.initialize(NO_CAPABILITIES)
        loaded = await agent.load_session(session_id)
        await agent.finish(within=30)
    # The replay, then the session's commands, all before the answer.
    assert loaded.replayed[:-1] == expected
    assert loaded.replayed[-1]["sessionUpdate"] == "available_commands_update"


def test_the_records_the_replay_skips_show_nothing() -> None:
    """`SHOWN_TYPES` leaves out only types that `_Shown.updates` neither shows
    nor keeps anything of (the walk skips them unread)."""
    from acp_bridge.log.records import RECORD_TYPES
    from acp_bridge.log.replay import SHOWN_TYPES, _Shown

    for kind in sorted(RECORD_TYPES - SHOWN_TYPES - {"stream/delta"}):
        shown = _Shown({}, compaction=True)
        record = {
            "type": kind,
            "turn": 1,
            "attempt": "att_a",
            "message_id": "msg_a",
            "prompt": [{"type": "text", "text": "hi"}],
            "content": [{"type": "text", "text": "hi"}],
            "text": "hi",
            "command": "compact",
            "retrying": True,
        }
        assert shown.updates(record) == [], kind
        assert (shown.message_ids, shown.compact_turn, shown.first_turn) == ({}, None, True), kind
