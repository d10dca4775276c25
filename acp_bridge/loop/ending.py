"""How a turn ends: what is recorded for each ending, over the turn's recorder.

`acp_bridge.loop.turn.Turn._end` is the one entrance: it runs once per turn
(an assertion fires on a second call), raises the fence (state SETTLING, then
ENDED: nothing of the turn reaches the editor or the log afterwards) and calls
`record_ending` here, then answers the prompt.  The endings, each recorded
differently (invariant I5):

* finished: the model ended the turn (an ACP stop reason);
* stopped, cause ``user`` (``session/cancel``): the delivered prefix of the
  open stream becomes an interrupted ``assistant/message``; nothing visible
  becomes an ``assistant/attempt`` with outcome ``empty``.  Answers
  ``cancelled``;
* stopped, cause ``disconnected`` (stdin EOF, broken stdout, a signal): the
  prefix is kept only as an attempt, never in model history;
* failed: a provider error or an idle stall; the attempt and an
  ``agent/request-error`` are logged, the prompt gets an error;
* internal: a bug in the loop; recorded as ``agent/internal-error`` with
  turn/end reason ``internal``, never blamed on the provider.

The ending of a stop closes whatever is open, in this order: the compaction
in progress (``cancelled``), the calls never dispatched
(``ABORTED_BEFORE_DISPATCH``), the tool calls shown without a final status,
the open stream (chunks still queued in the writer are taken back first), the
dispatched calls without a result, then ``step/end`` and ``turn/end``.

The synchronous Stop
--------------------

A ``session/cancel`` read while the turn is STREAMING ends the turn at once,
inside the call that read it: ``Turn.cancel`` aborts the provider stream
synchronously (``ProviderStream.abort``; the assembler then knows exactly
what was delivered) and calls ``Turn._stop_synchronously``, which runs the
ending.  That call may come from another task, or re-entrantly from the
turn's own task: the hot loop (``Turn._consume``) calls the writer's
``poll_input()`` between slices of stream handling, which reads stdin and
dispatches the cancel right there, so the ending runs below ``poll_input()``
in the middle of the loop.  The rules that make this safe:

* the ending is synchronous (no await) and enters SETTLING first, so a second
  Stop read while it records finds the turn no longer STREAMING and does not
  end it again; the assertion in ``Turn._end`` fires if it ever did;
* once ``poll_input()`` returns, the loop sees ``Turn.over`` and leaves; the
  turn's ``run`` finds it ``ended`` and does not call ``_end`` again;
* the watchdog and ``run`` ask ``ended`` before ending a turn themselves.

In RUNNING_TOOLS or AWAITING_EDITOR a Stop instead cancels the work in flight
and the turn's scope; ``run`` waits (SETTLING, shielded, bounded by the
cancel deadline) for the cleanup, and then ends it.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..compaction.shown import OpenCompaction, Shows, show
from ..errors import TurnFailed
from ..log.open_turn import Delivered, OpenStream
from ..log.records import AttemptOutcome, TurnEndReason
from ..providers.base import ProviderError, StreamIdleTimeout
from ..update_builders import tool_call_update
from .lifecycle import Ending
from .recorder import TurnRecorder, usage_record
from .session_core import SessionCore
from .stream import StepStream

__all__ = ["Closing", "close_open_tools", "fail_step", "record_ending"]

log = logging.getLogger("acp_bridge.turn")


class Closing(Shows, Protocol):
    """What the ending reads and closes of a turn."""

    stream: StepStream | None
    open_compaction: OpenCompaction | None
    stop_reason: str | None
    error: TurnFailed | None

    @property
    def number(self) -> int: ...

    @property
    def session(self) -> SessionCore: ...

    @property
    def rec(self) -> TurnRecorder: ...

    @property
    def cause(self) -> str | None: ...

    @property
    def left_out(self) -> bool: ...

    @property
    def overflow_why(self) -> str: ...

    def show_tool(self, update: dict[str, Any]) -> None: ...

    def abort_undispatched(self) -> None:
        """The step's calls never dispatched get ABORTED_BEFORE_DISPATCH."""
        ...


def record_ending(turn: Closing, ending: Ending) -> None:
    """Record ``ending``; sets ``turn.stop_reason`` or ``turn.error`` (the answer)."""
    if ending.how == "finished":
        assert ending.reason is not None
        turn.rec.turn_end(ending.reason, forced=False)
        turn.stop_reason = ending.reason
    elif ending.how == "stopped":
        record_stop(turn, forced=ending.forced)
    else:
        record_failure(turn, ending)


def record_stop(turn: Closing, *, forced: bool) -> None:
    """A user stop or a disconnect: commit what was delivered.

    What closes the open turn is `OpenTurn.close` (the closing a crash
    shares, `acp_bridge.log.open_turn`), fed what the live turn knows of the
    open stream: the assembler's delivered blocks and usage, after the
    chunks still queued are taken back.
    """
    reason: TurnEndReason = "cancelled" if turn.cause == "user" else "disconnected"
    turn.stop_reason = "cancelled"
    close_compaction(turn, "cancelled")
    turn.abort_undispatched()

    def delivered(_: OpenStream) -> Delivered | None:
        stream = turn.stream
        if stream is None:
            return None
        turn.session.outbox.remove_pre_flush(stream.asm.compact)
        retract_queued(turn, stream)
        turn.stream = None
        usage = usage_record(stream.asm.usage)
        return Delivered(stream.asm.interrupted_blocks(), usage)

    turn.rec.close(reason, forced=forced, delivered=delivered, show_tool=turn.show_tool)
    turn.stream = None


def retract_queued(turn: Closing, stream: StepStream) -> None:
    """Chunks still waiting in the outbox (the writer has not taken them)
    are taken back: the editor never gets them, so the stopped message
    holds what it does get, and the answer has less to wait behind.

    They are exactly the chunks not yet in a delta record: each batch the
    writer takes carries the delta record of its chunks, and any other
    record of the session writes the pending delta first (those chunks
    then stay, and are delivered).
    """
    slog = turn.rec.log
    tails = slog.unrecorded_text()
    count = sum(map(len, tails.values()))
    if not count:
        return
    if not stream.asm.can_retract(tails):  # a bug: then everything is delivered
        log.error("turn %d: the queued chunks do not match the stream", turn.number)
        return
    if turn.session.outbox.retract(stream.chunk_prefixes, count):
        slog.drop_unrecorded()
        stream.asm.retract(tails)
        log.debug("turn %d: %d queued chunk(s) taken back on a stop", turn.number, count)


def close_open_tools(turn: Closing, why: str) -> None:
    """Every tool call announced to the editor gets a final status."""
    for tool_id in list(turn.rec.open_tools):
        turn.show_tool(
            tool_call_update(
                {
                    "toolCallId": tool_id,
                    "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": why}}],
                }
            )
        )


def abort_unanswered(rec: TurnRecorder) -> None:
    """Tool calls dispatched but never answered get an aborted result."""
    for call_id, name in list(rec.unanswered.items()):
        text = f"Tool {name!r} was stopped before it returned a result."
        rec.tool_result(call_id, [{"type": "text", "text": text}], is_error=True)


def close_compaction(turn: Closing, status: str, **fields: Any) -> None:
    """The ending of a turn interrupted mid-compaction: the compaction's outcome."""
    opened, turn.open_compaction = turn.open_compaction, None
    if opened is None:
        return
    record = turn.rec.compaction(
        compaction_id=opened.compaction_id,
        attempt=opened.attempt,
        trigger=opened.trigger,
        status=status,
        **fields,
    )
    if record:
        show(turn, record)


def fail_step(turn: Closing, exc: ProviderError) -> None:
    """The step's request failed: its attempt and the error are logged, the step ends."""
    rec = turn.rec
    stream = turn.stream
    attempt = stream.attempt if stream is not None else None
    if stream is not None:
        outcome: AttemptOutcome = (
            "timed_out" if isinstance(exc, StreamIdleTimeout) else "provider_error"
        )
        rec.attempt(outcome, stream.asm.interrupted_blocks())
        turn.stream = None
    rec.request_error(exc, attempt=attempt)
    rec.step_end("timed_out" if isinstance(exc, StreamIdleTimeout) else "provider_error")


def record_failure(turn: Closing, ending: Ending) -> None:
    """A provider error, an idle stall, or our own bug: keep the attempt, never the content."""
    rec = turn.rec
    exc = ending.error
    internal = ending.how == "internal" or not isinstance(exc, ProviderError)
    timed_out = isinstance(exc, StreamIdleTimeout)
    if turn.open_compaction is not None:
        error = {"kind": "internal", "message": "the agent failed during the compaction"}
        if isinstance(exc, ProviderError):
            error = exc.to_record()
        close_compaction(turn, "failed", error=error)
    stream = turn.stream
    attempt = stream.attempt if stream is not None else None
    turn.abort_undispatched()
    close_open_tools(turn, "the agent failed" if internal else "the model request failed")
    if stream is not None:
        outcome: AttemptOutcome = (
            "internal" if internal else "timed_out" if timed_out else "provider_error"
        )
        rec.attempt(outcome, stream.asm.interrupted_blocks())
        turn.stream = None
    abort_unanswered(rec)
    if internal:
        assert exc is not None
        rec.internal_error(exc)
        rec.step_end("internal")
        rec.turn_end("internal", forced=False)
        turn.error = TurnFailed(
            f"Internal error in the agent: {type(exc).__name__}",
            {"kind": "internal"},
        )
        return
    assert isinstance(exc, ProviderError)
    if rec.step_open:
        rec.request_error(exc, attempt=attempt)
        rec.step_end("timed_out" if timed_out else "provider_error")
    rec.turn_end("error", forced=False, left_out=turn.left_out)
    message = f"Model request failed: {exc.message}"
    if turn.left_out:
        message += (
            f". This message does not fit the model's context window ({turn.overflow_why}), "
            "so it was left out of the conversation: the session goes on without it. "
            "Send something shorter, or attach less."
        )
    turn.error = TurnFailed(
        message,
        {
            "kind": exc.kind,
            "retryable": exc.retryable,
            "status": exc.status,
            "attempt": attempt,
        },
    )
