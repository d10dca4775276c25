"""Continuing a session log after the process that wrote it has gone.

A process can die anywhere (``kill -9``, a power cut): in the middle of a
line, in the middle of a stream, with a tool call dispatched and no result.
`closing_records` is the pure part: given the records of a log, it folds the
last turn (`acp_bridge.log.open_turn.OpenTurn`) and returns the records that
close it (`OpenTurn.close`) if it was left open, so that the log again follows the rules of
`acp_bridge.log.check` and its model history is valid (invariant I3):

* an open stream whose delivered text (rebuilt from its ``stream/delta``
  records) is visible becomes an interrupted ``assistant/message`` marked
  ``recovered: "crashed"``, holding exactly that text: the user saw it, so the
  model sees it too (invariant I2); an open stream with nothing visible
  becomes an ``assistant/attempt`` with outcome ``crashed``;
* a tool call shown to the editor without a final status gets a ``failed``
  ``tool/update``; a dispatched ``tool/call`` without a result gets an error
  ``tool/result`` saying its outcome is unknown;
* the open step ends with reason ``crashed`` and the turn with ``turn/end
  {reason: "crashed", forced: true}``, a reason of its own: not a user stop,
  not a disconnect.  If the crash interrupted the recording of a user stop
  (its interrupted message is already there), the stop is completed as
  ``cancelled`` instead.

`reopen` is the I/O part: it reads the file (`acp_bridge.log.upcast.load_log`),
cuts a torn last line, and returns a `SessionLog` that continues ``seq``, with
the closing records already appended.  The read and the cut are
`read_to_reopen`, which an event loop runs in a worker thread and hands to
`reopen` (a long session's file is megabytes).  For a replay
(`read_to_reopen`'s ``for_replay``) it reads the file with
`acp_bridge.log.replay_read.read_for_replay`, which folds the text deltas
into runs, unless the last turn was left open: closing it needs its deltas
as records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .open_turn import Closing, OpenTurn
from .records import RECOVERED_CRASHED
from .replay_read import Item, read_for_replay
from .upcast import LoadedLog, gc_paused, load_log
from .writer import RecordWriter, SessionLog

__all__ = ["Reopened", "closing_records", "read_to_reopen", "reopen"]

Record = dict[str, Any]


def last_turn(records: list[Record]) -> OpenTurn:
    """The shape of the log's last turn (only that turn can be open)."""
    state = OpenTurn(ended=True)
    start = len(records)
    while start > 0 and records[start - 1].get("type") != "turn/start":
        start -= 1
    for record in records[max(start - 1, 0) :]:
        state.feed(record)
    return state


def closing_records(records: list[Record]) -> list[Closing]:
    """The records that close the last turn of ``records`` if it was left open."""
    return last_turn(records).close(RECOVERED_CRASHED)


@dataclass
class Reopened:
    log: SessionLog
    # Every known record of the file, the closing ones included.
    records: list[Record]
    # The closing records appended (empty when the last turn had ended).
    closed: list[Record]
    torn: bool
    # For a replay: the records in order with the text deltas folded into
    # runs (`acp_bridge.log.replay_read`), which ``records`` then lack; None
    # when the file was read whole.
    items: list[Item] | None = None


Read = tuple[LoadedLog, list[Item] | None]


def read_to_reopen(path: str, *, for_replay: bool = False) -> Read:
    """The blocking part of `reopen`: read the log at ``path`` and cut a torn
    last line (the caller holds its `SessionLock`)."""
    loaded, items = _read(path, for_replay)
    _check_compactions(loaded, path)
    if loaded.torn:
        os.truncate(path, loaded.valid_size)
    return loaded, items


def _check_compactions(loaded: LoadedLog, path: str) -> None:
    """Refuse (`LogCorrupt`) a log whose compaction records ``acp-bridge
    history`` would refuse, by the same models: the history derived from a
    bad one (a negative ``kept_from``, a summary that is not text) would not
    be the one the log describes.  Only these records: they are few, and the
    reading above checked the rest's framing."""
    compactions = [r for r in loaded.records if r.get("type") == "compaction"]
    if compactions:
        from .reader import validate_records

        validate_records(compactions, path)


def reopen(path: str, outbox: RecordWriter, read: Read | None = None) -> Reopened:
    """Open an existing log for appending (the caller holds its `SessionLock`),
    from ``read`` (what `read_to_reopen` returned) or reading it now."""
    loaded, items = read_to_reopen(path) if read is None else read
    slog = SessionLog(path, outbox, next_seq=loaded.next_seq)
    records = loaded.records
    closed: list[Record] = []
    with gc_paused():
        slog.restore(records)
        for kind, turn, step, fields in closing_records(records):
            record = slog.append(kind, turn, step, **fields)
            closed.append(record)
    records.extend(closed)
    if items is not None:
        items.extend(closed)
    if closed:
        slog.sync()
    return Reopened(slog, records, closed, loaded.torn, items)


def _read(path: str, for_replay: bool) -> tuple[LoadedLog, list[Item] | None]:
    if for_replay:
        read = read_for_replay(path)
        # The runs leave out deltas; the last turn's records decide alone
        # whether it ended (only an open turn needs its deltas, to close it).
        if read is not None and last_turn(read[0].records).ended:
            return read
    return load_log(path), None
