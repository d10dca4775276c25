"""Every log append of one turn, in the vocabulary `acp_bridge.log.check` checks.

`TurnRecorder` is the only writer of a turn's records.  It knows the turn's
shape as the log sees it (which step is open, which stream, which tool calls
still lack a result, which tool calls announced to the editor still lack a
final status), so the turn's ending can close whatever is open without
keeping flags of its own.  The one difference between the kinds of turn
(a prompt, a regenerate, a ``/compact``, a slash command) is how the turn
starts: the recorder is given the turn's `TurnKind` when it is made, and
``turn_start`` writes what the kind says.  That shape is `acp_bridge.log.open_turn.OpenTurn`,
fed every record the recorder appends: the same fold reopen uses after a
crash and the checker uses on any log.

Once ``turn/end`` is written the recorder is *closed*: every later append is
dropped (and reported as False).  That is the log half of the turn's fence
(invariant I6): a task abandoned at the cancel deadline that wakes up later
cannot add a record to a turn that has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..log.open_turn import DeliveredOf, OpenStream, OpenTurn
from ..log.records import (
    AttemptOutcome,
    StepEndReason,
    StreamOutcome,
    ToolCallStatus,
    TurnEndReason,
)
from ..providers.base import ProviderError, Usage
from ..update_builders import tool_call_update

if TYPE_CHECKING:
    from ..log.writer import SessionLog
    from .lifecycle import TurnKind

log = logging.getLogger("acp_bridge.turn")

# The fields of a record that has none beyond the common head (never mutated).
_NO_FIELDS: dict[str, Any] = {}

__all__ = ["TurnRecorder", "usage_record"]


class TurnRecorder:
    def __init__(self, slog: SessionLog, turn: int, kind: TurnKind) -> None:
        self.log = slog
        self.turn = turn
        self.kind = kind
        # What of the turn is open in the log, from the records appended.
        self.open = OpenTurn(turn=turn)
        self.closed = False
        # The hot path's delta recorder (no per-chunk wrapper).
        self.delta = slog.delta

    @property
    def step(self) -> int:
        """The number of the turn's latest step (0 before the first)."""
        return self.open.step

    @property
    def step_open(self) -> bool:
        return self.open.step_open

    @property
    def stream(self) -> OpenStream | None:
        """The model stream with a ``stream/start`` and no record ending it yet."""
        return self.open.stream

    @property
    def unanswered(self) -> dict[str, str]:
        """tool/call records without their tool/result, in order: id -> name."""
        return self.open.unanswered

    @property
    def open_tools(self) -> dict[str, str]:
        """Tool calls announced to the editor without a final status: id -> title."""
        return self.open.open_tools

    def _append(self, type: str, step: int, fields: dict[str, Any] = _NO_FIELDS) -> bool:
        """Append a record of ``fields`` (a dict built for it, handed on as it
        is: one build per record, not one per call on its way to the file)."""
        if self.closed:
            log.debug("turn %d has ended; %s not recorded", self.turn, type)
            return False
        self.open.feed(self.log.add(type, self.turn, step, fields))
        return True

    # -- turn and steps -----------------------------------------------------

    def turn_start(self) -> None:
        """``turn/start`` and, for a prompt, the user's message (`TurnKind`)."""
        self._append("turn/start", 0, self.kind.start)
        if self.kind.message is not None:
            self._append("user/message", 0, self.kind.message)

    def step_start(self) -> None:
        if not self._append("step/start", self.step + 1):
            # Closed: nothing is recorded, but the steps are still counted (a
            # loop that woke up after the fence still reaches its step limit).
            self.open.step += 1
            self.open.step_open = True

    def step_end(self, reason: StepEndReason) -> None:
        if self.step_open and not self._append("step/end", self.step, {"reason": reason}):
            self.open.step_open = False

    def turn_end(self, reason: TurnEndReason, *, forced: bool, left_out: bool = False) -> None:
        """``left_out``: the turn leaves the model history (its prompt did not fit)."""
        fields: dict[str, Any] = {"reason": reason, "forced": forced}
        if left_out:
            fields["left_out"] = True
        self._append("turn/end", 0, fields)
        self.closed = True

    def close(
        self,
        reason: TurnEndReason,
        *,
        forced: bool,
        delivered: DeliveredOf | None,
        show_tool: Callable[[dict[str, Any]], None],
    ) -> None:
        """Close what is open of the turn, as `OpenTurn.close` says (the one
        closing a crash shares): each record appended before the next is
        built; a tool call's final status is shown through ``show_tool`` (it
        records it), a stream's end through the writer, which owns the stream."""
        for kind, _, step, fields in self.open.closing(reason, forced=forced, delivered=delivered):
            if kind == "tool/update":
                show_tool(tool_call_update(fields["update"]))
            elif kind == "stream/end":
                self.open.feed(self.log.close_stream(fields["outcome"]) or {})
            elif kind == "turn/end":
                self.turn_end(fields["reason"], forced=fields["forced"])
            else:
                self._append(kind, step, fields)

    # -- the model stream ---------------------------------------------------

    def stream_start(self, attempt: str, message_id: str, provider: str) -> None:
        if self.closed:
            return
        record = self.log.open_stream(
            attempt, self.turn, self.step, provider, message_id=message_id
        )
        self.open.feed(record)

    def message(
        self, content: list[dict[str, Any]], *, finish: str | None, usage: Usage | None
    ) -> None:
        """The open stream, finished, becomes a surface ``assistant/message``
        (committed); a stopped one is closed by `close`."""
        fields: dict[str, Any] = {
            "content": content,
            "interrupted": False,
            "finish": finish,
            "usage": usage_record(usage),
        }
        self._end_stream("assistant/message", "committed", fields)

    def attempt(self, outcome: AttemptOutcome, content: list[dict[str, Any]]) -> None:
        """The open stream leaves no surface message: an ``assistant/attempt`` (abandoned)."""
        self._end_stream("assistant/attempt", "abandoned", {"outcome": outcome, "content": content})

    def _end_stream(
        self, record_type: str, stream_outcome: StreamOutcome, fields: dict[str, Any]
    ) -> None:
        """The record that ends the open stream (its attempt and message id,
        then ``fields``), then its close."""
        stream = self.stream
        assert stream is not None
        self._append(
            record_type,
            self.step,
            {"attempt": stream.attempt, "message_id": stream.message_id, **fields},
        )
        if self.closed:
            stream.ended = True  # nothing more of it is recorded
        else:
            self.open.feed(self.log.close_stream(stream_outcome) or {})

    def request_error(
        self,
        error: ProviderError,
        *,
        attempt: str | None = None,
        retry: tuple[int, float] | None = None,
    ) -> dict[str, Any]:
        """``agent/request-error`` of ``attempt`` (default: the open stream's);
        ``retry`` is (attempt number, delay) when the provider retries the
        request itself.  Returns the record's fields."""
        if attempt is None and self.stream is not None:
            attempt = self.stream.attempt
        fields: dict[str, Any] = {
            "attempt": attempt,
            "error": error.to_record(),
        }
        if retry is not None:
            fields.update(retrying=True, retry_attempt=retry[0], retry_delay=retry[1])
        self._append("agent/request-error", self.step, fields)
        return fields

    def internal_error(self, exc: BaseException) -> None:
        """A bug in the agent's own loop (not the provider's fault, invariant I5)."""
        error = {"kind": "internal", "exception": type(exc).__name__, "message": str(exc)}
        self._append("agent/internal-error", self.step, {"error": error})

    # -- what the editor was shown ------------------------------------------

    def tool_announce(self, update: dict[str, Any]) -> None:
        """A ``tool_call`` sent to the editor (``update`` without ``sessionUpdate``)."""
        call_id = update["toolCallId"]
        self._append("tool/announce", self.step, {"tool_call_id": call_id, "update": update})

    def tool_update(self, update: dict[str, Any]) -> None:
        """A ``tool_call_update`` sent to the editor."""
        call_id = update["toolCallId"]
        self._append("tool/update", self.step, {"tool_call_id": call_id, "update": update})

    def compaction(self, **fields: Any) -> dict[str, Any]:
        """A ``compaction`` record (turn level: between steps); the record, or {} once closed."""
        if self.closed:
            return {}
        return self.log.append("compaction", self.turn, 0, **fields)

    def usage_update(self, used: int, size: int, *, step: bool = True, **fields: Any) -> None:
        """A ``usage_update`` sent: in the step, or (``step`` False) between steps."""
        self._append(
            "usage/update", self.step if step else 0, {"used": used, "size": size, **fields}
        )

    # -- tools --------------------------------------------------------------

    def tool_call(self, call_id: str, name: str, input: object, status: ToolCallStatus) -> None:
        fields = {"tool_call_id": call_id, "name": name, "input": input, "status": status}
        self._append("tool/call", self.step, fields)

    def tool_result(self, call_id: str, content: list[dict[str, Any]], *, is_error: bool) -> None:
        fields = {"tool_call_id": call_id, "content": content, "is_error": is_error}
        self._append("tool/result", self.step, fields)


def usage_record(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    record: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }
    if usage.context_window is not None:
        record["context_window"] = usage.context_window
    return record
