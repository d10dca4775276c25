"""A damaged log never makes ``acp-bridge history`` crash.

Valid logs (the whole-session snapshots) are mutated the ways a damaged or
foreign file differs from ours: a field of the wrong type (a list or an
object where an integer belongs), a missing field, an unknown record type,
a truncated file.  Through the reader and the derivation, either the reader
reports the log as corrupt with its line and field, or the history is derived
without an exception and is valid; through the real ``acp-bridge history``
subprocess, the answer is a history (status 0) or one line naming the file,
line and field (status 1), never a traceback.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.harness import ROOT

from acp_bridge.log.check import check_history
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import LogCorrupt, read_valid_records, validate_records
from acp_bridge.log.records import RECORD_TYPES
from acp_bridge.log.records.read import RECORD_MODELS
from acp_bridge.log.upcast import load_log

SNAPSHOTS = sorted((ROOT / "snapshots" / "test_sessions").glob("*.json"))
SESSION_ID = "sess_fuzz"


def _seed_logs() -> list[list[dict[str, Any]]]:
    logs: list[list[dict[str, Any]]] = []
    for path in SNAPSHOTS:
        for log in json.loads(path.read_text())["logs"]:
            for record in log:
                if record["type"] == "session/start":
                    record["session_id"] = SESSION_ID
                    record["cwd"] = "/project"
            logs.append(log)
    return logs


SEEDS = _seed_logs()

JUNK = st.one_of(
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(max_size=5),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a record (keys and list indexes)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((*prefix, key))
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.append((*prefix, index))
            out.extend(_paths(item, (*prefix, index)))
    return out


def _protected(path: tuple[Any, ...]) -> bool:
    # ``v`` and ``seq`` are checked before any model (tested elsewhere); a
    # change there is reported without a field path.
    return len(path) == 1 and path[0] in ("v", "seq")


@st.composite
def damaged_logs(draw: st.DrawFn) -> tuple[bytes, str]:
    """A mutated log as file bytes, and what was done to it."""
    log = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    index = draw(st.integers(0, len(log) - 1))
    record = log[index]
    action = draw(st.sampled_from(["replace", "replace", "delete", "unknown_type", "truncate"]))
    if action in ("replace", "delete"):
        paths = [p for p in _paths(record) if not _protected(p)]
        path = draw(st.sampled_from(paths))
        parent: Any = record
        for part in path[:-1]:
            parent = parent[part]
        if action == "replace":
            parent[path[-1]] = draw(JUNK)
        else:
            del parent[path[-1]]
        what = f"{action} record {index} at {path!r}"
    elif action == "unknown_type":
        record["type"] = draw(st.sampled_from(["tool_call/update", "x/y", "session/meta"]))
        what = f"record {index} gets type {record['type']}"
    else:
        what = "truncate"
    # json, not orjson: the junk may hold integers beyond 64 bits.
    data = "".join(json.dumps(r) + "\n" for r in log).encode()
    if action == "truncate":
        cut = draw(st.integers(0, len(data)))
        data = data[:cut]
        what = f"truncate at byte {cut}"
    return data, what


def _write(directory: Path, data: bytes) -> Path:
    sessions = directory / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    path = sessions / f"{SESSION_ID}.jsonl"
    path.write_bytes(data)
    return path


def test_the_seed_logs_are_valid() -> None:
    assert len(SEEDS) >= 10
    for log in SEEDS:
        assert validate_records(log) == log
        check_history(derive_messages(log))


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(damaged=damaged_logs())
@pytest.mark.slow
def test_a_damaged_log_is_reported_or_derived(tmp_path: Path, damaged: tuple[bytes, str]) -> None:
    data, what = damaged
    path = _write(tmp_path, data)
    warnings: list[str] = []
    corrupt: LogCorrupt | None = None
    try:
        records = read_valid_records(path, warn=warnings.append)
    except LogCorrupt as exc:
        corrupt = exc
    if corrupt is not None:
        assert corrupt.path == str(path)
        assert 1 <= corrupt.line_no <= data.count(b"\n"), what
        assert str(corrupt).startswith(f"{path}:{corrupt.line_no}: "), what
        return
    check_history(derive_messages(records))
    if "gets type" in what:
        assert warnings, what
        assert "unknown type" in warnings[0], what


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(damaged=damaged_logs())
@pytest.mark.slow
def test_a_damaged_log_loaded_as_history_does_is_reported_or_derived(
    tmp_path: Path, damaged: tuple[bytes, str]
) -> None:
    """The path of ``acp-bridge history``: upcast and cut a torn tail, then check shapes."""
    data, what = damaged
    path = _write(tmp_path, data)
    corrupt: LogCorrupt | None = None
    try:
        records = validate_records(load_log(path).records, path, warn=lambda _: None)
    except LogCorrupt as exc:
        corrupt = exc
    if corrupt is not None:
        assert corrupt.path == str(path), what
        assert 1 <= corrupt.line_no <= data.count(b"\n") + 1, what
        return
    check_history(derive_messages(records))


def test_a_list_where_the_turn_belongs_names_line_and_field(tmp_path: Path) -> None:
    log = copy.deepcopy(SEEDS[0])
    end = next(i for i, r in enumerate(log) if r["type"] == "turn/end")
    log[end]["turn"] = [1]
    path = _write(tmp_path, b"".join(orjson.dumps(r) + b"\n" for r in log))
    with pytest.raises(LogCorrupt) as caught:
        read_valid_records(path)
    assert caught.value.line_no == end + 1
    assert caught.value.field == "turn"
    assert "got an array" in caught.value.reason


def test_extra_fields_are_kept_and_unknown_types_skipped() -> None:
    log = copy.deepcopy(SEEDS[0])
    log[0]["client_info"] = {"name": "zed"}
    log.insert(1, {**log[1], "type": "session/meta", "title": "x"})
    warnings: list[str] = []
    kept = validate_records(log, "log.jsonl", warn=warnings.append)
    assert kept[0]["client_info"] == {"name": "zed"}
    assert all(r["type"] != "session/meta" for r in kept)
    assert len(kept) == len(log) - 1
    assert warnings == [
        "log.jsonl: skipped 1 record(s) of unknown type 'session/meta' "
        "(written by a newer acp-bridge?)"
    ]


def _history(state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_bridge", "history", "--state-dir", str(state_dir), SESSION_ID],
        capture_output=True,
        text=True,
        timeout=60,
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(damaged=damaged_logs())
@pytest.mark.slow
def test_history_subprocess_on_a_damaged_log(tmp_path: Path, damaged: tuple[bytes, str]) -> None:
    data, what = damaged
    state_dir = tmp_path / "state"
    path = _write(state_dir, data)
    run = _history(state_dir)
    assert "Traceback" not in run.stderr, what
    if run.returncode == 0:
        check_history(json.loads(run.stdout))
    else:
        assert run.returncode == 1, (what, run.stderr)
        assert run.stdout == ""
        assert run.stderr.startswith(f"acp-bridge: corrupt session log: {path}:"), run.stderr


def test_history_subprocess_names_file_line_and_field(tmp_path: Path) -> None:
    log = copy.deepcopy(SEEDS[0])
    end = next(i for i, r in enumerate(log) if r["type"] == "turn/end")
    log[end]["turn"] = {"n": 1}
    state_dir = tmp_path / "state"
    path = _write(state_dir, b"".join(orjson.dumps(r) + b"\n" for r in log))
    run = _history(state_dir)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert run.stderr == (
        f"acp-bridge: corrupt session log: {path}:{end + 1}: turn: "
        "input should be a valid integer, got an object (record type turn/end)\n"
    )


def test_history_subprocess_skips_an_unknown_record_type_with_a_warning(tmp_path: Path) -> None:
    log = copy.deepcopy(SEEDS[0])
    log.insert(1, {**log[1], "type": "session/meta", "title": "from a newer writer"})
    for seq, record in enumerate(log):
        record["seq"] = seq
    state_dir = tmp_path / "state"
    path = _write(state_dir, b"".join(orjson.dumps(r) + b"\n" for r in log))
    run = _history(state_dir)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == derive_messages(SEEDS[0])
    # One warning, naming the file, the line and the type (the reader that
    # upcasts a log skips such records for every command that loads one).
    [warning] = run.stderr.splitlines()
    assert f"{path}:2: skipping a record of unknown type 'session/meta'" in warning


def test_history_subprocess_names_the_line_after_a_skipped_record(tmp_path: Path) -> None:
    """A record of an unknown type still takes its line: the damaged record
    after it is named by its own line, not by its place among the kept ones."""
    log = copy.deepcopy(SEEDS[0])
    log.insert(1, {**log[1], "type": "session/meta", "title": "from a newer writer"})
    for seq, record in enumerate(log):
        record["seq"] = seq
    end = next(i for i, r in enumerate(log) if r["type"] == "turn/end")
    log[end]["turn"] = {"n": 1}
    state_dir = tmp_path / "state"
    path = _write(state_dir, b"".join(orjson.dumps(r) + b"\n" for r in log))
    run = _history(state_dir)
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        f"acp-bridge: corrupt session log: {path}:{end + 1}: turn: "
        "input should be a valid integer, got an object (record type turn/end)"
    )


def test_every_record_type_has_a_model() -> None:
    assert set(RECORD_MODELS) >= RECORD_TYPES


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"type": "usage/update", "used": 10, "size": 200_000}, None),
        ({"type": "usage/update", "used": [10], "size": 200_000}, "used"),
        ({"type": "tool/announce", "tool_call_id": "c1", "update": {"toolCallId": "c1"}}, None),
        ({"type": "tool/update", "tool_call_id": "c1", "update": "done"}, "update"),
        (
            {
                "type": "agent/internal-error",
                "error": {"kind": "internal", "exception": "KeyError", "message": "x"},
            },
            None,
        ),
        ({"type": "agent/internal-error", "error": {"kind": "internal"}}, "error.message"),
    ],
)
def test_the_records_of_what_the_editor_saw(record: dict[str, Any], field: str | None) -> None:
    full = {"v": 1, "seq": 0, "at": 1.0, "turn": 1, "step": 1, **record}
    if field is None:
        assert validate_records([full]) == [full]
    else:
        with pytest.raises(LogCorrupt) as caught:
            validate_records([full])
        assert caught.value.field == field
