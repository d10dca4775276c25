"""A log read back keeps its model records serialized until the session is used.

`SessionLog.restore` packs the records the history is derived from into one
JSON array; the first use (the history, the records, an append) unpacks
them.  A session loaded, left idle, then prompted must derive exactly the
history it would have derived had the records been kept as dicts: these
tests compare both with `derive_messages` (the reference) on every session
log of the snapshots, cut at every record and continued with the rest.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.log import writer
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.model_records import MODEL_TYPES, join_packs, model_pack
from acp_bridge.log.projection import HistoryProjection
from acp_bridge.log.writer import RecordWriter, SessionLog

Record = dict[str, Any]
SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"
LIVE_FIELDS = ("v", "seq", "at", "type", "turn", "step")


class Target:
    def __init__(self, path: str) -> None:
        self.path = path
        self.pending = bytearray()
        self.error: str | None = None
        self.synced_at = 0.0


class Writer:
    """A `RecordWriter` that keeps what is written in memory."""

    def __init__(self) -> None:
        self.data = bytearray()

    def open_log(self, path: str, *, create: bool = True) -> Target:
        return Target(path)

    def write_log(self, log: object, data: bytes) -> None:
        self.data += data

    def add_pre_flush(self, hook: object) -> None:
        pass


def reopened(records: list[Record]) -> SessionLog:
    slog = SessionLog("memory.jsonl", cast(RecordWriter, Writer()), next_seq=len(records))
    slog.restore(records)
    return slog


def continued(slog: SessionLog, rest: list[Record]) -> None:
    """Append ``rest`` as the live session would (same types and fields)."""
    for record in rest:
        fields = {k: v for k, v in record.items() if k not in LIVE_FIELDS}
        slog.append(record["type"], record["turn"], record["step"], **fields)


def snapshot_logs() -> list[tuple[str, list[Record]]]:
    found = []
    for path in sorted(SNAPSHOTS.rglob("*.json")):
        data = json.loads(path.read_text())
        for i, log in enumerate(data.get("logs") or [] if isinstance(data, dict) else []):
            if isinstance(log, list) and any(r.get("type") in MODEL_TYPES for r in log):
                found.append((f"{path.relative_to(SNAPSHOTS)}[{i}]", log))
    return found


SNAPSHOT_LOGS = snapshot_logs()


def test_a_restored_log_stays_packed_until_its_history_is_asked_for() -> None:
    _, records = SNAPSHOT_LOGS[0]
    slog = reopened(records)
    assert slog.packed
    assert list(slog.history.messages()) == derive_messages(records)
    assert not slog.packed


def test_an_append_after_a_restore_unpacks_first() -> None:
    _, records = SNAPSHOT_LOGS[0]
    slog = reopened(records)
    content = [{"type": "text", "text": "And now?"}]
    slog.append("user/message", 99, 0, content=content)
    assert not slog.packed
    assert slog.records[-1]["content"] == content
    expected = derive_messages([*records, {"type": "user/message", "turn": 99, "content": content}])
    assert list(slog.history.messages()) == expected


@pytest.mark.parametrize(("name", "records"), SNAPSHOT_LOGS, ids=[n for n, _ in SNAPSHOT_LOGS])
def test_every_cut_derives_the_eager_history(name: str, records: list[Record]) -> None:
    for cut in range(len(records) + 1):
        slog = reopened(records[:cut])
        eager = HistoryProjection([r for r in records[:cut] if r.get("type") in MODEL_TYPES])
        continued(slog, records[cut:])
        for record in records[cut:]:
            if record.get("type") in MODEL_TYPES:
                eager.append(record)
        expected = derive_messages(records)
        assert list(slog.history.messages()) == expected, cut
        assert list(eager.messages()) == expected, cut


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SNAPSHOT_LOGS), st.data())
def test_loaded_idle_then_used_is_the_history_of_the_log(
    named: tuple[str, list[Record]], data: st.DataObject
) -> None:
    """Packed at a random cut, asked for the history (or not) at another, continued."""
    _, records = named
    cut = data.draw(st.integers(0, len(records)))
    peek = data.draw(st.integers(cut, len(records)))
    slog = reopened(records[:cut])
    continued(slog, records[cut:peek])
    assert list(slog.history.messages()) == derive_messages(records[:peek])
    continued(slog, records[peek:])
    assert list(slog.history.messages()) == derive_messages(records)


def test_records_that_are_not_json_data_are_kept_as_they_are() -> None:
    record = {"type": "user/message", "turn": 1, "content": [{"type": "text", "text": "Hi"}]}
    odd = {**record, "extra": object()}
    slog = reopened([odd])
    assert not slog.packed
    assert slog.records == [odd]


@pytest.mark.parametrize("zip_below", [0, 1 << 30])
def test_compressed_or_not_the_history_is_the_same(
    zip_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import acp_bridge.log.writer as writer

    monkeypatch.setattr(writer, "ZIP_BELOW", zip_below)
    for _, records in SNAPSHOT_LOGS:
        slog = reopened(records)
        assert slog._zipped is (zip_below > 0)
        assert list(slog.history.messages()) == derive_messages(records)


def live(records: list[Record]) -> SessionLog:
    """A new session's log that appended ``records`` itself."""
    slog = SessionLog("memory.jsonl", cast(RecordWriter, Writer()))
    continued(slog, records)
    return slog


@pytest.mark.parametrize(("name", "records"), SNAPSHOT_LOGS, ids=[n for n, _ in SNAPSHOT_LOGS])
def test_a_live_log_packed_while_idle_derives_the_same_history(
    name: str, records: list[Record]
) -> None:
    """Packed after any record (a session left to rest), asked again, continued."""
    for cut in range(len(records) + 1):
        slog = live(records[:cut])
        slog.history.messages()  # used: the projection is built
        assert slog.pack(), cut
        assert slog.packed
        assert not slog.pack()  # already packed
        assert list(slog.history.messages()) == derive_messages(records[:cut]), cut
        slog.pack()
        continued(slog, records[cut:])
        assert list(slog.history.messages()) == derive_messages(records), cut


def test_a_log_with_an_open_stream_is_not_packed() -> None:
    slog = live([])
    slog.open_stream("att_1", 1, 1, "fake", message_id="msg_1")
    assert not slog.pack()
    assert not slog.packed


def test_a_short_history_packs_into_fewer_bytes_than_plain_zlib() -> None:
    import zlib

    import orjson

    _, records = SNAPSHOT_LOGS[0]
    kept = [r for r in records if r.get("type") in MODEL_TYPES]
    slog = reopened(records)
    assert slog._packed is not None
    assert len(slog._packed) < len(zlib.compress(orjson.dumps(kept), 1))


@pytest.mark.parametrize(("name", "records"), SNAPSHOT_LOGS, ids=[n for n, _ in SNAPSHOT_LOGS])
def test_restored_with_the_types_of_the_read_is_the_same(name: str, records: list[Record]) -> None:
    """`restore` given each record's type (as the read has them) keeps the same records."""
    plain = reopened(records)
    typed = SessionLog("memory.jsonl", cast(RecordWriter, Writer()), next_seq=len(records))
    typed.restore(records, [r["type"] for r in records])
    assert typed.records == plain.records
    assert list(typed.history.messages()) == derive_messages(records)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SNAPSHOT_LOGS), st.lists(st.integers(0, 60), max_size=4))
def test_the_packs_of_slices_joined_are_the_pack_of_the_whole(
    named: tuple[str, list[Record]], cuts: list[int]
) -> None:
    """The read packs each slice's model records (`model_pack`) while they are
    fresh; joined (`join_packs`), they are what `restore` would have packed,
    byte for byte, wherever the slices are cut (empty ones too)."""
    _, records = named
    kinds = [r["type"] for r in records]
    bounds = [0, *sorted(min(cut, len(records)) for cut in cuts), len(records)]
    packs = [model_pack(records[a:b], kinds[a:b]) for a, b in itertools.pairwise(bounds)]
    plain = reopened(records)
    packed = SessionLog("memory.jsonl", cast(RecordWriter, Writer()), next_seq=len(records))
    packed.restore(records, kinds, join_packs(packs))
    assert (packed._packed, packed._zipped) == (plain._packed, plain._zipped)
    assert packed.records == plain.records
    assert list(packed.history.messages()) == derive_messages(records)


def test_a_log_read_for_a_session_is_restored_from_the_read_s_pack(tmp_path: Path) -> None:
    """A read for a session (``pack``, as `reopen` reads) packs what `restore`
    would have packed of its records, byte for byte; a record nested too deep
    to write leaves the read without a pack, and `restore` keeps the dicts."""
    import orjson

    from acp_bridge.log.replay_read import read_for_replay

    _, records = max(SNAPSHOT_LOGS, key=lambda named: len(named[1]))
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    read = read_for_replay(path, pack=True)
    assert read is not None
    plain = reopened(read[0].records)
    assert plain._packed is not None
    expected = writer._unzip(plain._packed) if plain._zipped else plain._packed
    assert read[0].model_pack == expected
    unpacked = read_for_replay(path)  # an open session's replay: no pack
    assert unpacked is not None
    assert unpacked[0].model_pack is None

    deep: Any = "end"
    for _ in range(300):
        deep = [deep]
    odd = {**records[-1], "seq": len(records), "type": "user/message"}
    odd["content"] = [{"type": "text", "text": "deep"}, {"type": "odd", "deep": deep}]
    with path.open("ab") as file:
        # Written by hand: orjson writes no deeper than 255 levels.
        file.write(json.dumps(odd, separators=(",", ":")).encode() + b"\n")
    read = read_for_replay(path, pack=True)
    assert read is not None
    assert read[0].model_pack is None
    slog = SessionLog("memory.jsonl", cast(RecordWriter, Writer()), next_seq=len(records) + 1)
    slog.restore(read[0].records, read[0].kinds, read[0].model_pack)
    assert slog._packed is None
    assert slog.records[-1] == odd
