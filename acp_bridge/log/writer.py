"""Appending records to a session's event log.

`SessionLog` keeps the records the model history is derived from in memory
and queues every serialized record on the process `Outbox`, so log writes
are ordered with the frames sent to the editor.

Stream deltas are coalesced: while an assistant stream is open, each chunk
queued for the editor is added to a pending ``stream/delta`` record.  That
record is queued when the writer takes its next batch, in the same batch as
the frames it describes; the writer writes a batch's log records before its
frames, so a crash at any moment loses nothing the editor received.

The log writes through a `RecordWriter` (the process's ordered writer
implements it) and the `LogTarget` files it opens.  Its one read is of its
own file: a session loaded and left idle drops its model records when the
file holds every byte the log appended (`drop`), and reads them back from
the file when they are next needed (the file is the source of truth, the
log its only writer); a file that no longer holds exactly those bytes is
then an error.
"""

from __future__ import annotations

import errno
import time
import zlib
from collections.abc import Callable
from itertools import compress
from typing import Any, Final, Protocol

import orjson

from .model_records import MODEL_TYPES, for_history
from .projection import HistoryProjection
from .records import FORMAT_VERSION, StreamOutcome

_now = time.time
_dumps = orjson.dumps
# The line's newline is written by the encoder: no second copy of the line
# to add it (a record is encoded once, on the append's path).
_LINE: Final = orjson.OPT_APPEND_NEWLINE


def new_record(seq: int, type: str, turn: int, step: int, fields: dict[str, Any]) -> dict[str, Any]:
    """The record ``seq`` of a log: the common head (now as its time), then ``fields``."""
    return {
        "v": FORMAT_VERSION,
        "seq": seq,
        "at": _now(),
        "type": type,
        "turn": turn,
        "step": step,
        **fields,
    }


def encode_record(record: dict[str, Any]) -> bytes:
    """The record's line in the file."""
    return _dumps(record, option=_LINE)


class LogTarget(Protocol):
    """One session's file, as the log and its users see it."""

    path: str
    # Bytes that could not be written yet, in order.
    pending: bytearray
    # Why the last write failed, while it is still failing.
    error: str | None
    synced_at: float

    def write(self, data: bytes) -> None: ...

    def verify(self) -> None:
        """Check the file is still this log's own and writable, and write
        what is pending (before a turn starts); raises OSError if not."""

    def fsync(self) -> None:
        """Sync the file now, in the caller's thread."""

    def begin_sync(self) -> Callable[[], None]:
        """An fsync of the file to run in a worker thread while the log goes
        on; `end_sync` (on the loop) once it has run."""

    def end_sync(self) -> None: ...

    def close(self) -> None: ...


class RecordWriter(Protocol):
    """What the log needs from the writer that orders records with the frames."""

    def open_log(self, path: str, *, create: bool = True) -> LogTarget:
        """The file at ``path``; ``create=False`` for a log continued from its
        records, which must never be started anew."""

    def write_log(self, log: LogTarget, data: bytes) -> None: ...

    def fsync_log(self, log: LogTarget) -> None: ...

    def add_pre_flush(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each batch is taken (it may queue records)."""

    def remove_pre_flush(self, hook: Callable[[], None]) -> None: ...


dumps = orjson.dumps

# The model records of a log read back are kept compressed below this many
# bytes of JSON (a few turns compress about sixfold, in well under a
# millisecond); a longer log keeps its JSON as it is, so that its load does
# not wait for the compression.
ZIP_BELOW: Final = 256 * 1024


class SessionLog:
    __slots__ = (
        "_attempt",
        "_dropped",
        "_history",
        "_last",
        "_packed",
        "_parts",
        "_size",
        "_step",
        "_t0",
        "_timed",
        "_turn",
        "_zipped",
        "file",
        "outbox",
        "path",
        "seq",
    )

    def __init__(
        self, path: str, outbox: RecordWriter, *, next_seq: int = 0, size: int | None = None
    ) -> None:
        self.path = path
        self.outbox = outbox
        self.file = outbox.open_log(path, create=next_seq == 0)
        # The model-relevant records (MODEL_TYPES), in order, and the model
        # history they project onto, brought up to date when it is asked for
        # (`history`).  A log read back keeps them serialized (``_packed``)
        # until the session is used.
        self._history: HistoryProjection | None = HistoryProjection()
        self._packed: bytes | None = None
        self._zipped = False
        # The byte length of the file once everything appended is written:
        # ``size`` of a log continued (None if not known: then the records
        # are never dropped), 0 for a new one; and whether the model records
        # were dropped, to be read back from the file (`drop`).
        self._size: int | None = 0 if next_seq == 0 else size
        self._dropped = False
        self.seq = next_seq
        self._attempt: str | None = None
        self._turn = 0
        self._step = 0
        self._parts: list[list[Any]] = []
        self._last: list[Any] | None = None
        self._t0 = 0.0
        # [t_ms, index, kind, text], serialized, for each part of each delta
        # record of the open stream: the delivered stream, timed at the
        # granularity of the writes to the editor.
        self._timed = bytearray()

    def restore(
        self,
        records: list[dict[str, Any]],
        kinds: list[str] | None = None,
        packed: bytes | None = None,
    ) -> None:
        """Start the in-memory history from the records of a log read back.

        They are kept as one JSON array until the history or the records are
        first asked for (`history`), compressed when it is small enough to
        cost no more than a millisecond (`ZIP_BELOW`): a session loaded and
        left idle holds a few bytes per record, not the dicts (dozens of
        times that), and one never used costs no projection.  They are the records of the file
        as read, so they serialize, and read back equal (a test compares
        the history derived after a round trip with the eager one).
        A session that rests before it is used drops even these (`pack`,
        `drop`): kept until then, they spare a prompt right after a load a
        read of the file.  ``packed``: that array already (`model_pack` of
        the records), made by the read while each slice of them was fresh.
        """
        if packed is not None:
            self._set_pack(packed)
            return
        if kinds is None:
            model = [record for record in records if record.get("type") in MODEL_TYPES]
        else:  # ``kinds``: the type of each record (one pass over strings, not the dicts)
            model = list(compress(records, map(MODEL_TYPES.__contains__, kinds)))
        kept = [for_history(record) for record in model]
        if not self._pack(kept):  # not JSON data: keep the dicts
            self._history, self._packed = HistoryProjection(kept), None

    def pack(self) -> bool:
        """Make a session left idle small: keep its model records serialized
        until the history is next asked for, as a log read back does
        (`restore`), a few bytes per record instead of the dicts and the
        messages projected from them; a log read back and not used since
        keeps none (`drop`: its file holds them).  A session in use keeps
        its pack: reading its whole file back at each use, as sessions take
        turns, would churn memory more than the pack costs.  Not while a
        stream is open; False when nothing was packed or dropped (already
        done, a stream open, not JSON data)."""
        if self._attempt is not None or self._parts:
            return False
        history = self._history
        if history is None:
            return self.drop()
        return self._pack(history.records)

    def drop(self) -> bool:
        """Keep no model records: they are read back from the file when next
        needed (`history`).  Only when the file holds exactly what this log
        appended (its length is the log's, nothing is left to write) and no
        stream is open; False otherwise, or if they are dropped already."""
        if self._dropped or self._size is None or self._attempt is not None or self._parts:
            return False
        file = self.file
        if file.pending or file.error is not None or getattr(file, "lost", None) is not None:
            return False
        if getattr(file, "size", None) != self._size:
            return False
        self._history, self._packed, self._dropped = None, None, True
        return True

    @property
    def dropped(self) -> bool:
        """Whether the model records are to be read back from the file (`drop`)."""
        return self._dropped

    async def read_back(self) -> None:
        """Read the dropped model records back in a worker thread (the file of
        a long session is megabytes), so that the history asked for next
        costs no read on the event loop.  A read that fails here is left to
        that next ask, which reports it."""
        if not self._dropped:
            return
        import anyio.to_thread

        seq, size = self.seq, self._size
        try:
            records = await anyio.to_thread.run_sync(_model_records, self.path, seq, size)
        except OSError:
            return
        if self._dropped and (self.seq, self._size) == (seq, size):
            self._dropped = False
            self._history = HistoryProjection(records)

    def _pack(self, records: list[dict[str, Any]]) -> bool:
        try:
            packed = dumps(records)
        except (TypeError, orjson.JSONEncodeError):
            return False
        self._set_pack(packed)
        return True

    def _set_pack(self, packed: bytes) -> None:
        self._zipped = len(packed) <= ZIP_BELOW
        self._history, self._packed = None, _zip(packed) if self._zipped else packed

    @property
    def history(self) -> HistoryProjection:
        """The model history of the log (`HistoryProjection`), unpacked on first use."""
        history = self._history
        if history is None and self._dropped:
            records = _model_records(self.path, self.seq, self._size)
            self._dropped = False
            history = self._history = HistoryProjection(records)
        elif history is None:
            packed, self._packed = self._packed, None
            if packed is not None and self._zipped:
                packed = _unzip(packed)
            history = self._history = HistoryProjection(
                orjson.loads(packed) if packed is not None else None
            )
        return history

    @property
    def packed(self) -> bool:
        """Whether the records of a log read back are still serialized or
        dropped (not yet used)."""
        return self._history is None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The model-relevant records (`MODEL_TYPES`), in order (the projection's own list)."""
        return self.history.records

    def append(self, type: str, turn: int, step: int, **fields: Any) -> dict[str, Any]:
        return self.add(type, turn, step, fields)

    def add(self, type: str, turn: int, step: int, fields: dict[str, Any]) -> dict[str, Any]:
        """`append` with the fields as a dict of the caller's (not copied: the
        turn's recorder builds each record's fields once, and a record is
        encoded once, on this path)."""
        if self._dropped:
            self.history  # noqa: B018 (read back while the file holds exactly this log)
        if self._parts:
            self._flush_delta()
        record = new_record(self.seq, type, turn, step, fields)
        # Encoded before anything is committed: a record that cannot be
        # written (a value nested too deep, say) raises here and takes no
        # sequence number, so the log has no gap.
        data = encode_record(record)
        self.seq += 1
        if type in MODEL_TYPES:
            # The embedded timed stream is for readers of the file only.  The
            # projection takes the record in when the history is next asked
            # for (`HistoryProjection.messages` catches up), not here: a
            # Stop's interrupted message is appended while the editor waits
            # for the answer, and taking it in is most of that append's cost.
            self.history.records.append(for_history(record))
        if self._size is not None:
            self._size += len(data)
        self.outbox.write_log(self.file, data)
        return record

    # -- stream frames -----------------------------------------------------

    def open_stream(
        self, attempt: str, turn: int, step: int, provider: str, **fields: Any
    ) -> dict[str, Any]:
        """Append ``stream/start`` and start recording the stream's deltas; the record."""
        record = self.add(
            "stream/start", turn, step, {"attempt": attempt, "provider": provider, **fields}
        )
        self._attempt, self._turn, self._step = attempt, turn, step
        self._t0 = time.monotonic()
        self._timed = bytearray()
        self.outbox.add_pre_flush(self._flush_delta)
        return record

    def delta(self, index: int, kind: str, text: str) -> None:
        """Record a chunk that has just been queued for the editor (hot path)."""
        last = self._last
        if last is not None and last[0] == index and last[1] == kind:
            last[2].append(text)
        else:
            last = [index, kind, [text]]
            self._parts.append(last)
            self._last = last

    def unrecorded_text(self) -> dict[int, list[str]]:
        """The text and reasoning chunks given to `delta` since the last delta
        record, by block index, each block's in order.  Each went out as one
        frame, and those frames are the stream's newest."""
        tails: dict[int, list[str]] = {}
        for index, kind, fragments in self._parts:
            if kind != "tool_args":
                tails.setdefault(index, []).extend(fragments)
        return tails

    def drop_unrecorded(self) -> None:
        """Forget the chunks of `unrecorded_text` (their frames were taken back
        before the editor got them).  Tool-call arguments stay to be recorded."""
        kept = [part for part in self._parts if part[1] == "tool_args"]
        self._parts = kept
        self._last = kept[-1] if kept else None

    def delivered_stream(self) -> orjson.Fragment:
        """The open stream's delivered parts so far, ``[[t_ms, index, kind, text], ...]``.

        Returned already serialized: each part was encoded once, when its
        delta record was written, so embedding the whole stream in an
        interrupted message costs a copy, not a second encoding, at the moment
        the user is waiting for the stop to be answered.
        """
        self._flush_delta()
        return orjson.Fragment(b"[" + self._timed + b"]")

    def close_stream(self, outcome: StreamOutcome) -> dict[str, Any] | None:
        """Append the open stream's ``stream/end``; the record (None if no stream is open)."""
        if self._attempt is None:
            return None
        self.outbox.remove_pre_flush(self._flush_delta)
        self._timed = bytearray()  # the stream is recorded; keep no copy of it
        attempt, self._attempt = self._attempt, None
        return self.add(
            "stream/end", self._turn, self._step, {"attempt": attempt, "outcome": outcome}
        )

    def _flush_delta(self) -> None:
        if not self._parts:
            return
        if self._attempt is None:
            self._parts, self._last = [], None
            return
        encoded = [dumps([index, kind, "".join(frags)]) for index, kind, frags in self._parts]
        self._parts = []
        self._last = None
        t_ms = dumps(round((time.monotonic() - self._t0) * 1000, 3))
        # "[index,kind,text]" -> "[t_ms,index,kind,text]"
        timed = self._timed
        for part in encoded:
            if timed:
                timed += b","
            timed += b"[" + t_ms + b"," + part[1:]
        parts = orjson.Fragment(b"[" + b",".join(encoded) + b"]")
        self.add("stream/delta", self._turn, self._step, {"attempt": self._attempt, "parts": parts})

    def sync(self) -> None:
        """Ask for an fsync once everything queued so far is written."""
        self.outbox.fsync_log(self.file)


# Small packs are compressed harder, with a preset dictionary of what every
# log's model records repeat (the fields, the usual values): a short idle
# session's records then take a few hundred bytes.  Larger ones are
# compressed fast, so that a load does not wait for it.
ZIP_HARD_BELOW: Final = 32 * 1024
_ZDICT: Final = (
    b'{"v":1,"seq":0,"at":1700000000.0,"type":"turn/start","turn":1,"step":0},'
    b'{"v":1,"seq":1,"at":1700000000.0,"type":"user/message","turn":1,"step":0,'
    b'"content":[{"type":"text","text":""}],"prompt":[{"type":"text","text":""}]},'
    b'{"v":1,"seq":2,"at":1700000000.0,"type":"assistant/message","turn":1,"step":1,'
    b'"attempt":"att_","message_id":"msg_","content":[{"type":"reasoning","text":""},'
    b'{"type":"text","text":""},{"type":"tool_call","id":"","name":"","input":{}}],'
    b'"interrupted":false,"finish":"end_turn","usage":{"input_tokens":0,"output_tokens":0}},'
    b'{"v":1,"seq":3,"at":1700000000.0,"type":"tool/result","turn":1,"step":1,'
    b'"tool_call_id":"","is_error":false,"content":[{"type":"text","text":""}]},'
    b'{"v":1,"seq":4,"at":1700000000.0,"type":"turn/end","turn":1,"step":0,'
    b'"reason":"end_turn","forced":false}'
)


def _zip(data: bytes) -> bytes:
    level = 9 if len(data) <= ZIP_HARD_BELOW else 1
    packer = zlib.compressobj(level, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, _ZDICT)
    return packer.compress(data) + packer.flush()


def _unzip(data: bytes) -> bytes:
    return zlib.decompressobj(-15, zdict=_ZDICT).decompress(data)


def _model_records(path: str, seq: int, size: int | None) -> list[dict[str, Any]]:
    """The model records of the log file at ``path``, as `SessionLog.restore`
    keeps them; `LogFileLost` unless the file holds ``seq`` records in ``size``
    bytes, as the log that dropped them left it."""
    from .errors import LogCorrupt
    from .logfile import LogFileLost
    from .replay_read import read_for_replay
    from .upcast import load_log

    try:
        # Read as a load reads it (the deltas folded, their dicts freed as it
        # goes), or whole when the file needs more than a glance.
        read = read_for_replay(path)
        loaded = read[0] if read is not None else load_log(path)
    except (LogCorrupt, FileNotFoundError) as exc:
        raise LogFileLost(errno.ESTALE, f"its records cannot be read back: {exc}") from None
    if loaded.torn or loaded.next_seq != seq or loaded.valid_size != size:
        raise LogFileLost(
            errno.ESTALE,
            f"its records cannot be read back: the file holds {loaded.next_seq} records "
            f"in {loaded.valid_size} bytes, not the {seq} in {size} this session wrote",
        )
    return [for_history(r) for r in loaded.records if r.get("type") in MODEL_TYPES]
