"""Writing a session's event log, in one home: `SessionLog` is its entry point.

This module appends records (`SessionLog`, each record's line made by
`new_record` and `encode_record`); `acp_bridge.log.writer.files` is the files
on disk and the writes the ordered writer makes to them (`LogWrites`), and
`acp_bridge.log.writer.lock` the one-writer-per-session lock.

`SessionLog` keeps the records the model history is derived from in memory
and queues every serialized record on the process `Outbox`, so log writes
are ordered with the frames sent to the editor.

Stream deltas are coalesced: while an assistant stream is open, each chunk
queued for the editor is added to a pending ``stream/delta`` record.  That
record is queued when the writer takes its next batch, in the same batch as
the frames it describes; the writer writes a batch's log records before its
frames, so a crash at any moment loses nothing the editor received.

The log writes through a `RecordWriter` (the process's ordered writer
implements it) and the `LogTarget` files it opens; it never reads them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Protocol

import orjson

from ..projection import HistoryProjection
from ..records import FORMAT_VERSION, MODEL_TYPES, StreamOutcome

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


def for_history(record: dict[str, Any]) -> dict[str, Any]:
    """The record without the timed stream an interrupted message of an
    older log embeds (this writer leaves it to the stream's deltas)."""
    if "stream" not in record:
        return record
    return {key: value for key, value in record.items() if key != "stream"}


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


class SessionLog:
    __slots__ = (
        "_attempt",
        "_last",
        "_parts",
        "_step",
        "_turn",
        "file",
        "history",
        "outbox",
        "path",
        "seq",
    )

    def __init__(self, path: str, outbox: RecordWriter, *, next_seq: int = 0) -> None:
        self.path = path
        self.outbox = outbox
        self.file = outbox.open_log(path, create=next_seq == 0)
        # The model-relevant records (MODEL_TYPES), in order, and the model
        # history they project onto, brought up to date when it is asked for.
        self.history = HistoryProjection()
        self.seq = next_seq
        self._attempt: str | None = None
        self._turn = 0
        self._step = 0
        self._parts: list[list[Any]] = []
        self._last: list[Any] | None = None

    def restore(self, records: list[dict[str, Any]]) -> None:
        """Start the in-memory history from the records of a log read back."""
        model = [record for record in records if record.get("type") in MODEL_TYPES]
        self.history = HistoryProjection([for_history(record) for record in model])

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
        if self._parts:
            self.flush_delta()
        record = new_record(self.seq, type, turn, step, fields)
        # Encoded before anything is committed: a record that cannot be
        # written (a value nested too deep, say) raises here and takes no
        # sequence number, so the log has no gap.
        data = encode_record(record)
        self.seq += 1
        if type in MODEL_TYPES:
            # The projection takes the record in when the history is next
            # asked for (`HistoryProjection.messages` catches up), not here: a
            # Stop's interrupted message is appended while the editor waits
            # for the answer, and taking it in is most of that append's cost.
            self.history.records.append(record)
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
        self.outbox.add_pre_flush(self.flush_delta)
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

    def close_stream(self, outcome: StreamOutcome) -> dict[str, Any] | None:
        """Append the open stream's ``stream/end``; the record (None if no stream is open)."""
        if self._attempt is None:
            return None
        self.outbox.remove_pre_flush(self.flush_delta)
        attempt, self._attempt = self._attempt, None
        return self.add(
            "stream/end", self._turn, self._step, {"attempt": attempt, "outcome": outcome}
        )

    def flush_delta(self) -> None:
        """Append the pending ``stream/delta`` record of the chunks given to
        `delta` so far (the writer does, before it takes a batch)."""
        if not self._parts:
            return
        if self._attempt is None:
            self._parts, self._last = [], None
            return
        parts = [[index, kind, "".join(frags)] for index, kind, frags in self._parts]
        self._parts = []
        self._last = None
        self.add("stream/delta", self._turn, self._step, {"attempt": self._attempt, "parts": parts})

    def sync(self) -> None:
        """Ask for an fsync once everything queued so far is written."""
        self.outbox.fsync_log(self.file)
