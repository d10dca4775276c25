"""Continuing a session log after the process that wrote it has gone.

A process can die anywhere (``kill -9``, a power cut): in the middle of a
line, in the middle of a stream, with a tool call dispatched and no result.
`closing_records` is the pure part: given the records of a log, it returns the
records that close a turn left open, so that the log again follows the rules of
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
the closing records already appended.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Final

from .derive import RECOVERED_CRASHED, join_parts, visible_blocks
from .records import FINAL_TOOL_STATUSES
from .upcast import gc_paused, load_log
from .writer import RecordWriter, SessionLog

__all__ = ["CRASHED", "Closing", "Reopened", "closing_records", "reopen"]

CRASHED: Final = RECOVERED_CRASHED
OUTCOME_UNKNOWN: Final = (
    "The outcome of this tool call is unknown: the agent stopped before the tool "
    "returned a result. It may or may not have run."
)
TOOL_STOPPED: Final = "the agent stopped before this tool call finished"

Record = dict[str, Any]
# (type, turn, step, fields) of one record to append.
Closing = tuple[str, int, int, dict[str, Any]]



@dataclass
class _Stream:
    message_id: str | None
    started: float
    surface: str | None = None
    interrupted: bool = False
    ended: bool = False
    parts: list[tuple[float, int, str, str]] = field(default_factory=list)


@dataclass
class _State:
    turn: int = 0
    ended: bool = True
    step: int = 0
    step_open: bool = False
    streams: dict[str, _Stream] = field(default_factory=dict)
    unanswered: dict[str, str] = field(default_factory=dict)
    shown: dict[str, bool] = field(default_factory=dict)


def _scan(records: list[Record]) -> _State:
    """The state of the log's last turn (only that turn can be open)."""
    state = _State()
    start = len(records)
    while start > 0 and records[start - 1].get("type") != "turn/start":
        start -= 1
    for record in records[max(start - 1, 0) :]:
        kind = record.get("type")
        if kind == "turn/start":
            state = _State(turn=record.get("turn", 0), ended=False)
        elif kind == "turn/end":
            state.ended = True
        elif kind == "step/start":
            state.step, state.step_open = record.get("step", 0), True
            state.streams, state.unanswered = {}, {}
        elif kind == "step/end":
            state.step_open = False
        elif kind == "stream/start":
            attempt = record.get("attempt")
            if isinstance(attempt, str):
                state.streams[attempt] = _Stream(record.get("message_id"), _at(record))
        elif kind in ("stream/delta", "stream/end", "assistant/message", "assistant/attempt"):
            stream = state.streams.get(record.get("attempt"))  # type: ignore[arg-type]
            if stream is not None:
                _feed_stream(stream, record)
        elif kind == "tool/call":
            state.unanswered[record["tool_call_id"]] = str(record.get("name", ""))
        elif kind == "tool/result":
            state.unanswered.pop(record.get("tool_call_id"), None)  # type: ignore[arg-type]
        elif kind in ("tool/announce", "tool/update"):
            update = record.get("update") or {}
            state.shown[record["tool_call_id"]] = update.get("status") in FINAL_TOOL_STATUSES
    return state


def _feed_stream(stream: _Stream, record: Record) -> None:
    kind = record["type"]
    if kind == "stream/delta":
        t_ms = round((_at(record) - stream.started) * 1000, 3)
        for index, part_kind, text in record.get("parts", ()):
            stream.parts.append((t_ms, index, part_kind, text))
    elif kind == "stream/end":
        stream.ended = True
    else:
        stream.surface = kind
        stream.interrupted = record.get("interrupted") is True


def _at(record: Record) -> float:
    at = record.get("at")
    return float(at) if isinstance(at, int | float) else 0.0


def closing_records(records: list[Record]) -> list[Closing]:
    """The records that close the last turn of ``records`` if it was left open."""
    state = _scan(records)
    if state.ended:
        return []
    turn, step = state.turn, state.step
    out: list[Closing] = []
    reason = CRASHED
    if state.step_open:
        for call_id, final in state.shown.items():
            if not final:
                update = {
                    "toolCallId": call_id,
                    "status": "failed",
                    "content": [_content(TOOL_STOPPED)],
                }
                out.append(("tool/update", turn, step, {"tool_call_id": call_id, "update": update}))
        for attempt, stream in state.streams.items():
            if stream.ended:
                continue
            if stream.surface is None:
                out.extend(_close_stream(attempt, stream, turn, step))
            else:
                if stream.interrupted:
                    reason = "cancelled"  # a user stop was being recorded
                outcome = "committed" if stream.surface == "assistant/message" else "abandoned"
                out.append(("stream/end", turn, step, {"attempt": attempt, "outcome": outcome}))
        for call_id in state.unanswered:
            content = [{"type": "text", "text": OUTCOME_UNKNOWN}]
            fields = {"tool_call_id": call_id, "content": content, "is_error": True}
            out.append(("tool/result", turn, step, fields))
        out.append(("step/end", turn, step, {"reason": reason}))
    out.append(("turn/end", turn, 0, {"reason": reason, "forced": True}))
    return out


def _content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _close_stream(attempt: str, stream: _Stream, turn: int, step: int) -> list[Closing]:
    content = visible_blocks(join_parts(stream.parts))
    base = {"attempt": attempt, "message_id": stream.message_id}
    if content:
        timed = [[t_ms, index, kind, text] for t_ms, index, kind, text in stream.parts]
        fields = {
            **base,
            "content": content,
            "interrupted": True,
            "finish": None,
            "usage": None,
            "stream": timed,
            "recovered": CRASHED,
        }
        return [
            ("assistant/message", turn, step, fields),
            ("stream/end", turn, step, {"attempt": attempt, "outcome": "committed"}),
        ]
    fields = {**base, "outcome": CRASHED, "content": []}
    return [
        ("assistant/attempt", turn, step, fields),
        ("stream/end", turn, step, {"attempt": attempt, "outcome": "abandoned"}),
    ]


@dataclass
class Reopened:
    log: SessionLog
    # Every known record of the file, the closing ones included.
    records: list[Record]
    # The closing records appended (empty when the last turn had ended).
    closed: list[Record]
    torn: bool


def reopen(path: str, outbox: RecordWriter) -> Reopened:
    """Open an existing log for appending (the caller holds its `SessionLock`)."""
    loaded = load_log(path)
    if loaded.torn:
        os.truncate(path, loaded.valid_size)
    slog = SessionLog(path, outbox, next_seq=loaded.next_seq)
    records = loaded.records
    closed: list[Record] = []
    with gc_paused():
        slog.restore(records)
        for kind, turn, step, fields in closing_records(records):
            record = slog.append(kind, turn, step, **fields)
            closed.append(record)
    records.extend(closed)
    if closed:
        slog.sync()
    return Reopened(slog, records, closed, loaded.torn)
