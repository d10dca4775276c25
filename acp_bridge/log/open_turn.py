"""What an open turn looks like in the log, and the records that close it.

A turn is *open* from its ``turn/start`` to its ``turn/end``.  While it is
open, the log may hold parts of it that a reader of the history needs closed:
a step without ``step/end``, a model stream without ``stream/end`` (and maybe
without the ``assistant/message`` or ``assistant/attempt`` that ends it), a
dispatched ``tool/call`` without a ``tool/result``, a tool call shown to the
editor (``tool/announce``) without a final status.

`OpenTurn` is that shape as a fold over the turn's records (`feed`), pure and
free of I/O.  Three readers share it: the live recorder
(`acp_bridge.loop.recorder.TurnRecorder`) feeds it every record it appends;
`acp_bridge.log.reopen` folds the last turn of a log left open by a process
that died; `acp_bridge.log.check` asks it what a step or a turn still lacks.

`OpenTurn.close` returns the records that close what is open, in the order the
log requires (see `acp_bridge.log.check`): the final ``tool/update`` of every
tool call still shown as running, then each open stream's surface record and
``stream/end``, an error ``tool/result`` for every unanswered ``tool/call``,
``step/end`` and ``turn/end``, the last two with the given reason.  A user
stop and a crash close a turn the same way, but for the reason and the words
they leave: a crash (``crashed``) marks its recovered message and says a
tool's outcome is unknown, a stop (``cancelled``) says the tool was stopped;
a disconnect (``disconnected``) keeps the delivered prefix as an attempt.  The
live Stop (`acp_bridge.loop.ending.record_stop`) closes through the same
`OpenTurn.closing`, one record at a time, giving it what the live turn knows
of the open stream (`Delivered`) instead of the prefix rebuilt from deltas.

An interrupted message does not repeat its stream: the timed stream it was
built from is the attempt's ``stream/delta`` records before it (what the
editor was sent, each part timed by its record), which the checker holds it to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .derive import join_parts, visible_blocks
from .records import (
    FINAL_TOOL_STATUSES,
    RECOVERED_CRASHED,
    AttemptOutcome,
    StreamOutcome,
    TurnEndReason,
)

__all__ = [
    "OUTCOME_UNKNOWN",
    "TOOL_STOPPED",
    "Closing",
    "Delivered",
    "DeliveredOf",
    "OpenStream",
    "OpenTurn",
]

OUTCOME_UNKNOWN: Final = (
    "The outcome of this tool call is unknown: the agent stopped before the tool "
    "returned a result. It may or may not have run."
)
TOOL_STOPPED: Final = "the agent stopped before this tool call finished"

Record = Mapping[str, Any]
# (type, turn, step, fields) of one record to append.
Closing = tuple[str, int, int, dict[str, Any]]


@dataclass
class OpenStream:
    """A model stream of the open step: its ``stream/start`` and what followed."""

    attempt: str
    message_id: str | None
    started: float = 0.0
    # The assistant/* record type written for it, if any, and whether that
    # message is interrupted.
    surface: str | None = None
    interrupted: bool = False
    ended: bool = False
    # Its stream/end's outcome, once ended.
    outcome: str | None = None
    # (t_ms, index, kind, text) of each part of its stream/delta records.
    parts: list[tuple[float, int, str, str]] = field(default_factory=list)


@dataclass
class OpenTurn:
    """The open parts of one turn, folded from its records (see the module docstring)."""

    turn: int = 0
    ended: bool = False
    step: int = 0
    step_open: bool = False
    # The streams started in the open step, by attempt id.
    streams: dict[str, OpenStream] = field(default_factory=dict)
    # tool/call records of the open step without their tool/result: id -> name.
    unanswered: dict[str, str] = field(default_factory=dict)
    # Tool calls shown to the editor in this turn without a final status: id -> title.
    open_tools: dict[str, str] = field(default_factory=dict)

    @property
    def stream(self) -> OpenStream | None:
        """The stream still waiting for its surface record (at most one)."""
        for stream in self.streams.values():
            if stream.surface is None and not stream.ended:
                return stream
        return None

    # -- the fold ---------------------------------------------------------------

    def feed(self, record: Record) -> None:
        """Take in the next record of the turn."""
        kind = record.get("type")
        if kind in _PASSIVE:
            return  # the common records that open or close nothing
        if kind == "turn/start":
            self._start(record.get("turn", 0))
        elif kind == "turn/end":
            self.ended = True
        elif kind == "step/start":
            self.step, self.step_open = record.get("step", 0), True
            self.streams, self.unanswered = {}, {}
        elif kind == "step/end":
            self.step_open = False
        elif kind == "stream/start":
            attempt = record.get("attempt")
            if isinstance(attempt, str):
                self.streams[attempt] = OpenStream(attempt, record.get("message_id"), _at(record))
        elif kind in _STREAM_TYPES:
            stream = self.streams.get(record.get("attempt"))  # type: ignore[arg-type]
            if stream is not None:
                _feed_stream(stream, record)
        elif kind == "tool/call":
            self.unanswered[record["tool_call_id"]] = str(record.get("name", ""))
        elif kind == "tool/result":
            self.unanswered.pop(record.get("tool_call_id"), None)  # type: ignore[arg-type]
        elif kind in ("tool/announce", "tool/update"):
            self._shown(kind, record["tool_call_id"], record.get("update") or {})

    def _start(self, turn: int) -> None:
        self.turn, self.ended, self.step, self.step_open = turn, False, 0, False
        self.streams, self.unanswered, self.open_tools = {}, {}, {}

    def _shown(self, kind: str, call_id: str, update: Mapping[str, Any]) -> None:
        if update.get("status") in FINAL_TOOL_STATUSES:
            self.open_tools.pop(call_id, None)
        elif kind == "tool/announce":
            self.open_tools[call_id] = str(update.get("title", ""))

    # -- closing ----------------------------------------------------------------

    def close(
        self,
        reason: TurnEndReason,
        *,
        forced: bool = True,
        delivered: DeliveredOf | None = None,
    ) -> list[Closing]:
        """The records that close this turn with ``reason`` (none if it has ended).

        ``crashed`` is the process dying: if the crash interrupted the
        recording of a user stop (its interrupted message is already there),
        the stop is completed as ``cancelled`` instead.  ``disconnected``
        keeps the delivered prefix only as an ``assistant/attempt`` (never in
        model history, invariant I5).  See `closing` for ``delivered``.
        """
        return list(self.closing(reason, forced=forced, delivered=delivered))

    def closing(
        self,
        reason: TurnEndReason,
        *,
        forced: bool = True,
        delivered: DeliveredOf | None = None,
    ) -> Iterator[Closing]:
        """`close`, one record at a time: the live Stop appends each record
        before it asks for the next, so what it appends (the tool updates
        write the pending delta) is in the log when the next is built.

        ``delivered`` is asked, when the open stream is reached, for what the
        live turn knows of its delivered prefix (the assembler's content and
        usage); without it, or when it answers None, the prefix is rebuilt
        from the stream's deltas, as after a crash.
        """
        if self.ended:
            return
        turn, step = self.turn, self.step
        crashed = reason == RECOVERED_CRASHED
        if self.step_open:
            why = TOOL_STOPPED if crashed else _STOP_WHY.get(reason, reason)
            for call_id in list(self.open_tools):
                update = {"toolCallId": call_id, "status": "failed", "content": [_content(why)]}
                yield ("tool/update", turn, step, {"tool_call_id": call_id, "update": update})
            for attempt, stream in list(self.streams.items()):
                if stream.ended:
                    continue
                if stream.surface is None:
                    known = delivered(stream) if delivered is not None else None
                    yield from _close_stream(attempt, stream, turn, step, reason, known)
                    continue
                if stream.interrupted:
                    reason = "cancelled"  # a user stop was being recorded
                outcome: StreamOutcome = (
                    "committed" if stream.surface == "assistant/message" else "abandoned"
                )
                yield ("stream/end", turn, step, {"attempt": attempt, "outcome": outcome})
            for call_id, name in list(self.unanswered.items()):
                text = OUTCOME_UNKNOWN if crashed else _stopped_text(name)
                content = [{"type": "text", "text": text}]
                fields = {"tool_call_id": call_id, "content": content, "is_error": True}
                yield ("tool/result", turn, step, fields)
            yield ("step/end", turn, step, {"reason": reason})
        yield ("turn/end", turn, 0, {"reason": reason, "forced": forced})


@dataclass(frozen=True)
class Delivered:
    """What the live turn knows of its open stream's delivered prefix."""

    # The visible blocks delivered (empty: nothing visible).
    content: list[dict[str, Any]]
    # The stream's usage record, if the provider reported one.
    usage: dict[str, Any] | None


DeliveredOf = Callable[[OpenStream], Delivered | None]


_STREAM_TYPES: Final = frozenset(
    {"stream/delta", "stream/end", "assistant/message", "assistant/attempt"}
)
# Records `OpenTurn.feed` takes in without a change (a user message and a
# usage report come with every turn; the rest are errors and compactions).
_PASSIVE: Final = frozenset(
    {
        "user/message",
        "usage/update",
        "agent/request-error",
        "agent/internal-error",
        "compaction",
    }
)
# What a closed tool call's final status says, by the reason its turn ended.
_STOP_WHY: Final = {"cancelled": "cancelled before it ran"}


def _stopped_text(name: str) -> str:
    return f"Tool {name!r} was stopped before it returned a result."


def _feed_stream(stream: OpenStream, record: Record) -> None:
    kind = record["type"]
    if kind == "stream/delta":
        t_ms = round((_at(record) - stream.started) * 1000, 3)
        for index, part_kind, text in record.get("parts", ()):
            stream.parts.append((t_ms, index, part_kind, text))
    elif kind == "stream/end":
        stream.ended, stream.outcome = True, record.get("outcome")
    else:
        stream.surface = kind
        stream.interrupted = record.get("interrupted") is True


def _at(record: Record) -> float:
    at = record.get("at")
    return float(at) if isinstance(at, int | float) else 0.0


def _content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _close_stream(
    attempt: str,
    stream: OpenStream,
    turn: int,
    step: int,
    reason: TurnEndReason,
    known: Delivered | None,
) -> Iterator[Closing]:
    """An open stream's delivered text becomes an interrupted message; with
    nothing visible, or on a disconnect, an attempt."""
    crashed = reason == RECOVERED_CRASHED
    if known is None:
        content = visible_blocks(join_parts(stream.parts))
        usage = None
    else:
        content, usage = known.content, known.usage
    base = {"attempt": attempt, "message_id": stream.message_id}
    if content and reason != "disconnected":
        fields: dict[str, Any] = {
            **base,
            "content": content,
            "interrupted": True,
            "finish": None,
            "usage": usage,
        }
        if crashed:
            fields["recovered"] = RECOVERED_CRASHED
        yield ("assistant/message", turn, step, fields)
        yield ("stream/end", turn, step, {"attempt": attempt, "outcome": "committed"})
        return
    outcome: AttemptOutcome = (
        "crashed" if crashed else "disconnected" if reason == "disconnected" else "empty"
    )
    yield ("assistant/attempt", turn, step, {**base, "outcome": outcome, "content": content})
    yield ("stream/end", turn, step, {"attempt": attempt, "outcome": "abandoned"})
