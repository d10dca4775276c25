"""Reading session logs: torn tails, corruption, versions, and where files live."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from support.harness import EVENT_LOG_SCHEMA

from acp_bridge.log.reader import (
    LogCorrupt,
    iter_session_files,
    read_records,
    session_path,
    validate_session_id,
)
from acp_bridge.log.upcast import LoadedLog, load_log


def _record(seq: int, type: str, turn: int, step: int, **fields: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "seq": seq,
        "at": 1_700_000_000.0 + seq,
        "type": type,
        "turn": turn,
        "step": step,
        **fields,
    }


SAMPLE: list[dict[str, Any]] = [
    _record(0, "session/start", 0, 0, session_id="sess_1", cwd="/project", provider="scripted"),
    _record(1, "turn/start", 1, 0),
    _record(2, "user/message", 1, 0, content=[{"type": "text", "text": "héllo\u2028 there"}]),
    _record(3, "step/start", 1, 1),
    _record(4, "stream/start", 1, 1, attempt="att_1", provider="scripted"),
    _record(5, "stream/delta", 1, 1, attempt="att_1", parts=[[0, "text", "Hi"]]),
    _record(
        6,
        "assistant/message",
        1,
        1,
        attempt="att_1",
        content=[{"type": "text", "text": "Hi"}],
        interrupted=False,
        finish="end_turn",
        usage=None,
    ),
    _record(7, "stream/end", 1, 1, attempt="att_1", outcome="committed"),
    _record(8, "step/end", 1, 1, reason="end_turn"),
    _record(9, "turn/end", 1, 0, reason="end_turn", forced=False),
]


def read_log_whole(path: Path) -> LoadedLog:
    """The log as `read_records` reads it, with where its complete records end."""
    return load_log(path, keep_unknown=True)


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_bytes(data)
    return path


def test_sample_records_match_the_schema() -> None:
    schema = EVENT_LOG_SCHEMA
    validator = jsonschema.Draft202012Validator(schema)
    for record in SAMPLE:
        assert list(validator.iter_errors(record)) == [], record


def test_round_trip(tmp_path: Path) -> None:
    data = _jsonl(SAMPLE)
    contents = read_log_whole(_write(tmp_path, data))
    assert contents.records == SAMPLE
    assert contents.valid_size == len(data)
    assert contents.torn is False
    assert read_records(tmp_path / "log.jsonl") == SAMPLE


def test_empty_file_has_no_records(tmp_path: Path) -> None:
    contents = read_log_whole(_write(tmp_path, b""))
    assert (contents.records, contents.valid_size, contents.torn) == ([], 0, False)


def test_missing_file_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_records(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("cut", [1, 17, -2])
def test_torn_tail_without_newline_is_ignored(tmp_path: Path, cut: int) -> None:
    complete = _jsonl(SAMPLE[:4])
    last = orjson.dumps(SAMPLE[4])
    contents = read_log_whole(_write(tmp_path, complete + last[:cut]))
    assert contents.records == SAMPLE[:4]
    assert contents.valid_size == len(complete)
    assert contents.torn is True


def test_complete_record_without_newline_counts_as_torn(tmp_path: Path) -> None:
    # The newline is part of the append: without it the append did not finish,
    # and a writer must not glue its next record onto this line.
    complete = _jsonl(SAMPLE[:4])
    contents = read_log_whole(_write(tmp_path, complete + orjson.dumps(SAMPLE[4])))
    assert contents.records == SAMPLE[:4]
    assert contents.torn is True


@pytest.mark.parametrize("garbage", [b'{"v": 1, "seq"', b"\x00\x00\x00", b""])
def test_unparseable_last_line_is_ignored(tmp_path: Path, garbage: bytes) -> None:
    complete = _jsonl(SAMPLE[:3])
    contents = read_log_whole(_write(tmp_path, complete + garbage + b"\n"))
    assert contents.records == SAMPLE[:3]
    assert contents.valid_size == len(complete)
    assert contents.torn is True


@pytest.mark.slow
def test_every_byte_cut_reads_the_complete_lines(tmp_path: Path) -> None:
    data = _jsonl(SAMPLE)
    path = tmp_path / "log.jsonl"
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        complete_lines = data[:cut].count(b"\n")
        contents = read_log_whole(path)
        assert contents.records == SAMPLE[:complete_lines], cut
        assert data[: contents.valid_size].count(b"\n") == complete_lines
        assert contents.torn == (cut != contents.valid_size)


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        (b'{"v": 1, "seq": 1, "ty', "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "JSON object, not an array"),
        (b'"text"', "JSON object, not a string"),
        (b"null", "JSON object, not null"),
    ],
)
def test_bad_line_in_the_middle_is_corruption(tmp_path: Path, bad_line: bytes, reason: str) -> None:
    data = _jsonl(SAMPLE[:1]) + bad_line + b"\n" + _jsonl(SAMPLE[1:3])
    path = _write(tmp_path, data)
    with pytest.raises(LogCorrupt, match=reason) as caught:
        read_records(path)
    assert caught.value.line_no == 2
    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)


def test_bad_last_line_followed_by_torn_bytes_is_corruption(tmp_path: Path) -> None:
    # Only the final line can be torn; a bad line before it is damage.
    data = _jsonl(SAMPLE[:2]) + b"{oops\n" + b'{"v": 1'
    with pytest.raises(LogCorrupt) as caught:
        read_records(_write(tmp_path, data))
    assert caught.value.line_no == 3


def _with(index: int, **changes: Any) -> list[dict[str, Any]]:
    records = [dict(record) for record in SAMPLE]
    records[index].update(changes)
    return records


@pytest.mark.parametrize(
    ("records", "line_no", "reason"),
    [
        (_with(3, seq=4), 4, "seq is 4, expected 3"),
        (_with(0, seq=1), 1, "seq is 1, expected 0"),
        (_with(1, seq=True), 2, "seq is True, expected 1"),
        (SAMPLE[:2] + SAMPLE[3:], 3, "seq is 3, expected 2"),
        (_with(2, v=2), 3, "unknown format version 2"),
        (_with(2, v=True), 3, "unknown format version True"),
        (_with(2, v="1"), 3, "unknown format version '1'"),
        (_with(5, type=7), 6, "the record has no string 'type'"),
    ],
)
def test_envelope_errors_are_corruption(
    tmp_path: Path, records: list[dict[str, Any]], line_no: int, reason: str
) -> None:
    with pytest.raises(LogCorrupt, match=reason) as caught:
        read_records(_write(tmp_path, _jsonl(records)))
    assert caught.value.line_no == line_no
    assert caught.value.reason.startswith(reason)


def test_a_bad_envelope_on_the_last_line_is_not_a_torn_tail(tmp_path: Path) -> None:
    # It parsed, so the append completed: a wrong seq there is real damage.
    with pytest.raises(LogCorrupt, match="seq"):
        read_records(_write(tmp_path, _jsonl([*SAMPLE[:3], {**SAMPLE[3], "seq": 9}])))


def test_missing_version_is_corruption(tmp_path: Path) -> None:
    record = {key: value for key, value in SAMPLE[0].items() if key != "v"}
    with pytest.raises(LogCorrupt, match="unknown format version None"):
        read_records(_write(tmp_path, _jsonl([record])))


# -- where sessions live ------------------------------------------------------


@pytest.mark.parametrize("session_id", ["sess_0123abcd", "a", "A-b_c.d", "x" * 128, "0.1"])
def test_session_path_for_valid_ids(tmp_path: Path, session_id: str) -> None:
    path = session_path(tmp_path, session_id)
    assert path == os.path.join(str(tmp_path), "sessions", session_id + ".jsonl")
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "session_id",
    ["", ".", "..", "../etc", "a/b", "a\\b", ".hidden", "a b", "é", "x" * 129, "a\x00", "a\n"],
)
def test_session_path_rejects_unsafe_ids(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(ValueError, match="invalid session id"):
        session_path(tmp_path, session_id)
    with pytest.raises(ValueError, match="invalid session id"):
        validate_session_id(session_id)


def test_iter_session_files_lists_valid_logs_sorted(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for name in [
        "sess_b.jsonl",
        "sess_a.jsonl",
        "a.b.jsonl",
        "notes.txt",
        ".hidden.jsonl",
        "sess_c.jsonl.tmp",
        "bad name.jsonl",
        ".jsonl",
    ]:
        (sessions / name).write_bytes(b"")
    (sessions / "dir.jsonl").mkdir()
    found = list(iter_session_files(tmp_path))
    assert found == [str(sessions / name) for name in ["a.b.jsonl", "sess_a.jsonl", "sess_b.jsonl"]]
    assert found[0] == session_path(tmp_path, "a.b")


def test_iter_session_files_without_sessions_dir(tmp_path: Path) -> None:
    assert list(iter_session_files(tmp_path / "missing")) == []


def test_reader_imports_no_validation_libraries() -> None:
    code = (
        "import sys, acp_bridge.log.reader; "
        "print(sorted(m for m in ('pydantic', 'jsonschema') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"
