"""One prompt turn: steps of model calls, streamed to the editor, logged as they go.

A turn runs as its own task.  The ``session/prompt`` handler waits for
`Turn.settled` and answers with `Turn.stop_reason`.  Three things can end a
turn early, and each is recorded differently (invariant I5):

* ``session/cancel`` (cause ``user``): the delivered prefix of the open stream
  becomes an interrupted ``assistant/message``; nothing visible becomes an
  ``assistant/attempt`` with outcome ``empty``.  The turn answers
  ``cancelled``.
* a disconnect or a signal (cause ``disconnected``): the prefix is kept only
  as an attempt, never in model history.
* a provider error or an idle stall: the attempt and an
  ``agent/request-error`` are logged; the turn answers with an error.

Cancellation is one cancel scope per turn.  Whatever is under it unwinds and
the cleanup below records the outcome.  If it does not unwind within the
cancel deadline, the watchdog settles the turn anyway (``forced``) and fences
it: nothing the stuck task does later reaches the editor or the log
(invariant I6).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel
import orjson

from ..jsonrpc.errors import RpcError
from ..providers.base import (
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    Retrying,
    StreamIdleTimeout,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from .assembler import AssemblyError, StreamAssembler
from .stop import stop_reason_for_finish
from .updates import CHUNK_SUFFIX

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("acp_bridge.turn")


# Longest stretch of stream handling between two yields to the event loop.
TIME_SLICE: Final = 50e-6


@dataclass(frozen=True, slots=True)
class TurnConfig:
    max_steps: int = 25
    cancel_deadline: float = 5.0
    idle_timeout: float | None = 300.0


class _Stream:
    """The open model stream of the current step."""

    __slots__ = ("asm", "attempt", "message_id", "open_tools")

    def __init__(self) -> None:
        self.attempt = "att_" + uuid.uuid4().hex[:16]
        # One id for the model response: its reasoning and its text are one
        # assistant message to the editor, as they are in the history.
        self.message_id = "msg_" + uuid.uuid4().hex[:16]
        self.asm = StreamAssembler()
        # Tool calls announced to the editor that have no final status yet.
        self.open_tools: dict[str, str] = {}


def unavailable_tool_text(name: str) -> str:
    return (
        f"Tool {name!r} is not available in this session: no tools can be run yet. "
        "Continue without it."
    )


class Turn:
    def __init__(
        self,
        session: Session,
        number: int,
        prompt: list[dict[str, Any]],
        config: TurnConfig,
        spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], object],
    ) -> None:
        self.session = session
        self.spawn = spawn
        self._pending_tools: list[dict[str, Any]] = []
        self._step_open = False
        self.number = number
        self.prompt = prompt
        self.config = config
        self.settled = anyio.Event()
        # Called once, synchronously, when the turn settles.
        self.on_settled: Callable[[], None] | None = None
        self.stop_reason: str | None = None
        self.error: RpcError | None = None
        self.cause: str | None = None
        self.forced = False
        self.fenced = False
        self.scope = anyio.CancelScope()
        self.step = 0
        self.stream: _Stream | None = None
        self._finalized = False
        # True while the turn is inside a model stream (and nothing else).
        self._streaming = False
        self._events: object = None
        # The id of the session/prompt request this turn answers.
        self.request_id: object = None

    # -- control (called from other tasks) ---------------------------------

    def cancel(self, cause: str) -> bool:
        """Ask the turn to stop; the first cause wins.  Returns False if already settled."""
        if self.settled.is_set():
            return False
        if self.cause is None:
            self.cause = cause
        if self._streaming and self._abort_stream():
            # Only the model stream was in flight and it is now closed, and
            # what it delivered is known (the assembler is updated
            # synchronously): settle here rather than after the task unwinds.
            # The turn is fenced, so nothing of it can follow the answer.
            self._finish_interrupted()
        # The task unwinds afterwards (or, when the stream could not be
        # aborted, this is what stops it).
        self.scope.cancel()
        return True

    def _abort_stream(self) -> bool:
        abort = getattr(self._events, "abort", None)
        return bool(abort()) if abort is not None else False

    async def watchdog(self) -> None:
        """After a cancel, settle the turn by the deadline even if it is stuck."""
        with anyio.move_on_after(self.config.cancel_deadline):
            await self.settled.wait()
            return
        if not self.settled.is_set():
            log.warning(
                "turn %d did not stop within %.1fs; abandoning it",
                self.number,
                self.config.cancel_deadline,
            )
            self.forced = True
            self._finish_interrupted()

    # -- the turn ----------------------------------------------------------

    async def run(self) -> None:
        slog = self.session.log
        slog.append("turn/start", self.number, 0)
        slog.append("user/message", self.number, 0, content=self.prompt)
        reason: str | None = None
        try:
            with self.scope:
                reason = await self._steps()
        except ProviderError as exc:
            self._finish_failed(exc)
            return
        except AssemblyError as exc:
            self._finish_failed(ProviderError(f"malformed model stream: {exc}", kind="protocol"))
            return
        except Exception as exc:
            log.exception("turn %d failed", self.number)
            self._finish_failed(
                ProviderError(f"internal error: {type(exc).__name__}", kind="internal")
            )
            return
        if self.scope.cancelled_caught or reason is None:
            self._finish_interrupted()
        else:
            self._finish(reason)

    async def _steps(self) -> str | None:
        """Run steps until a stop reason; None when the turn was stopped."""
        while True:
            if self.cause is not None:
                return None  # stopped before this step: no model request at all
            if self.step >= self.config.max_steps:
                return "max_turn_requests"
            self.step += 1
            self.session.log.append("step/start", self.number, self.step)
            self._step_open = True
            finish = await self._stream_step()
            if self.cause is not None or self.fenced:
                return None
            stop = stop_reason_for_finish(finish)
            if stop is None:
                self._answer_tool_calls()
            self.session.log.append("step/end", self.number, self.step, reason=stop or "tool_use")
            self._step_open = False
            if stop is not None:
                return stop

    async def _stream_step(self) -> str | None:
        session = self.session
        stream = _Stream()
        self.stream = stream
        request = ModelRequest(messages=session.history())
        session.log.open_stream(stream.attempt, self.number, self.step, session.provider.name)
        step_scope = anyio.CancelScope()
        idle = _IdleWatch(self.config.idle_timeout, step_scope)
        if idle.limit is not None:
            self.spawn(idle.run)
        self._streaming = True
        session.outbox.add_pre_flush(stream.asm.compact)
        try:
            with step_scope:
                await self._consume(request, stream, idle)
        finally:
            self._streaming = False
            self._events = None
            session.outbox.remove_pre_flush(stream.asm.compact)
            idle.stop()
        if idle.fired:
            raise StreamIdleTimeout(idle.limit or 0.0)
        if self.cause is not None or self.fenced:
            return None  # stopped: the turn's ending records what was delivered
        return self._commit(stream)

    async def _consume(self, request: ModelRequest, stream: _Stream, idle: _IdleWatch) -> None:
        """The hot loop: each event is fed, sent to the editor and logged, in that order."""
        session = self.session
        outbox = session.outbox
        prefixes: dict[type, tuple[bytes, str]] = {
            TextDelta: (
                session.frames.chunk_prefix("agent_message_chunk", stream.message_id),
                "text",
            ),
            ReasoningDelta: (
                session.frames.chunk_prefix("agent_thought_chunk", stream.message_id),
                "reasoning",
            ),
        }
        feed, send, delta = stream.asm.feed, outbox.send, session.log.delta
        dumps = orjson.dumps
        clock = time.perf_counter
        yield_at = clock() + TIME_SLICE
        async with session.provider.stream(request) as events:
            self._events = events
            async for ev in events:
                idle.seen += 1
                if clock() > yield_at:
                    # Fairness: a provider that hands out many events without
                    # waiting would otherwise keep the loop from reading a
                    # cancel until its next pause.
                    await anyio.lowlevel.checkpoint()
                    yield_at = clock() + TIME_SLICE
                if self.cause is not None:
                    # A stop was read while the provider yielded: leave now
                    # rather than wait for the cancellation to be delivered.
                    return
                if type(ev) is Retrying:
                    # A failed attempt the provider retries (before any output):
                    # log material only, never fed to the assembler.
                    session.log.append(
                        "agent/request-error",
                        self.number,
                        self.step,
                        attempt=stream.attempt,
                        error=ev.error.to_record(),
                        retrying=True,
                        retry=ev.attempt,
                        delay=round(ev.delay, 3),
                    )
                    continue
                feed(ev)
                chunk = prefixes.get(type(ev))
                if chunk is not None:
                    prefix, kind = chunk
                    text_ev: TextDelta = ev  # type: ignore[assignment]  # or ReasoningDelta: same fields
                    send(prefix + dumps(text_ev.text) + CHUNK_SUFFIX)
                    delta(text_ev.index, kind, text_ev.text)
                    if outbox.backlog > outbox.high_water:
                        # Waiting for the editor to read is not provider silence.
                        idle.paused = True
                        try:
                            await outbox.wait_writable()
                        finally:
                            idle.paused = False
                elif type(ev) is ToolCallStart:
                    self._announce_tool(ev)
                elif type(ev) is ToolCallDelta:
                    delta(ev.index, "tool_args", ev.args)
                elif type(ev) is Usage:
                    self._report_usage(ev)
            # The stream is complete: from here a stop no longer interrupts it.
            self._streaming = False
        if stream.asm.finish is None:
            stream.asm.end_stream()

    def _commit(self, stream: _Stream) -> str:
        """A stream that ended normally becomes the step's assistant message."""
        slog = self.session.log
        asm = stream.asm
        content = asm.blocks()  # AssemblyError: a malformed stream, see run()
        self.stream = None
        usage = asm.usage
        if content:
            slog.append(
                "assistant/message",
                self.number,
                self.step,
                attempt=stream.attempt,
                content=content,
                interrupted=False,
                finish=asm.finish or "end_turn",
                usage=_usage_record(usage),
            )
            slog.close_stream("committed")
        else:
            self._record_attempt(stream, "empty", [])
        finish = asm.finish
        if finish is None:
            finish = "tool_use" if asm.completed_tool_calls() else "end_turn"
        self._pending_tools = asm.completed_tool_calls() if finish == "tool_use" else []
        if finish != "tool_use":
            self._close_open_tools(stream, "model ended the turn without running this tool")
        return finish

    # -- tools (none are available yet) ------------------------------------

    def _announce_tool(self, ev: ToolCallStart) -> None:
        assert self.stream is not None
        self.stream.open_tools[ev.id] = ev.name
        self._emit(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": ev.id,
                "title": ev.name,
                "kind": "other",
                "status": "pending",
            }
        )

    def _answer_tool_calls(self) -> None:
        slog = self.session.log
        for call in self._pending_tools:
            text = unavailable_tool_text(call["name"])
            slog.append(
                "tool/call",
                self.number,
                self.step,
                tool_call_id=call["id"],
                name=call["name"],
                input=call["input"],
                status="unavailable",
            )
            result = [{"type": "text", "text": text}]
            slog.append(
                "tool/result",
                self.number,
                self.step,
                tool_call_id=call["id"],
                content=result,
                is_error=True,
            )
            self._emit(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call["id"],
                    "status": "failed",
                    "rawInput": call["input"],
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                }
            )
        self._pending_tools = []

    def _close_open_tools(self, stream: _Stream, why: str) -> None:
        for tool_id in list(stream.open_tools):
            self._emit(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": tool_id,
                    "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": why}}],
                }
            )
        stream.open_tools.clear()

    def _report_usage(self, usage: Usage) -> None:
        if usage.context_window:
            used = usage.input_tokens + usage.output_tokens
            self._emit(
                {"sessionUpdate": "usage_update", "used": used, "size": usage.context_window}
            )

    def _emit(self, update: dict[str, Any]) -> None:
        if not self.fenced:
            self.session.outbox.send(self.session.frames.update(update))

    # -- endings -----------------------------------------------------------

    def _settle(self) -> None:
        self.settled.set()
        if self.on_settled is not None:
            self.on_settled()

    def _finish(self, reason: str) -> None:
        if self._finalized:
            return
        self._finalized = True
        self.session.log.append("turn/end", self.number, 0, reason=reason, forced=False)
        self.stop_reason = reason
        self._settle()

    def _finish_interrupted(self) -> None:
        """A user stop or a disconnect: commit what was delivered, then settle.

        The turn settles (and the editor gets its answer) even if recording
        fails halfway: a stop must never leave a prompt unanswered.
        """
        if self._finalized:
            return
        self._finalized = True
        try:
            self._record_interruption()
        finally:
            self.fenced = True
            self.stop_reason = "cancelled"
            self._settle()

    def _record_interruption(self) -> None:
        slog = self.session.log
        user_stop = self.cause == "user"
        outcome = "cancelled" if user_stop else "disconnected"
        stream = self.stream
        if stream is not None:
            self.session.outbox.remove_pre_flush(stream.asm.compact)
            self._close_open_tools(
                stream, "cancelled before it ran" if user_stop else "disconnected"
            )
            self._pending_tools = []
            blocks = stream.asm.interrupted_blocks()
            if user_stop and blocks:
                slog.append(
                    "assistant/message",
                    self.number,
                    self.step,
                    attempt=stream.attempt,
                    content=blocks,
                    interrupted=True,
                    finish=None,
                    usage=_usage_record(stream.asm.usage),
                    stream=slog.delivered_stream(),
                )
                slog.close_stream("committed")
            else:
                self._record_attempt(stream, "empty" if user_stop else "disconnected", blocks)
            self.stream = None
        if self._step_open:
            slog.append("step/end", self.number, self.step, reason=outcome)
        slog.append("turn/end", self.number, 0, reason=outcome, forced=self.forced)

    def _record_attempt(self, stream: _Stream, outcome: str, content: list[dict[str, Any]]) -> None:
        """A stream that leaves no surface message: kept as an attempt only."""
        self.session.log.append(
            "assistant/attempt",
            self.number,
            self.step,
            attempt=stream.attempt,
            outcome=outcome,
            content=content,
        )
        self.session.log.close_stream("abandoned")

    def _finish_failed(self, exc: ProviderError) -> None:
        """A provider error or idle stall: keep the attempt, never the content."""
        if self._finalized:
            return
        if self.cause is not None:
            # A stop raced with the failure: the user's decision wins.
            self._finish_interrupted()
            return
        self._finalized = True
        slog = self.session.log
        stream = self.stream
        timed_out = isinstance(exc, StreamIdleTimeout)
        attempt = stream.attempt if stream is not None else None
        if stream is not None:
            self._close_open_tools(stream, "the model request failed")
            outcome = "timed_out" if timed_out else "provider_error"
            self._record_attempt(stream, outcome, stream.asm.interrupted_blocks())
            self.stream = None
        slog.append(
            "agent/request-error", self.number, self.step, attempt=attempt, error=exc.to_record()
        )
        if self._step_open:
            slog.append(
                "step/end",
                self.number,
                self.step,
                reason="timed_out" if timed_out else "provider_error",
            )
        slog.append("turn/end", self.number, 0, reason="error", forced=False)
        self.fenced = True
        self.error = RpcError(
            -32603,
            f"Model request failed: {exc.message}",
            {
                "kind": exc.kind,
                "retryable": exc.retryable,
                "status": exc.status,
                "attempt": attempt,
            },
        )
        self._settle()


class _IdleWatch:
    """Cancels the step's scope when no stream event arrives for ``limit`` seconds.

    The hot loop only bumps a counter; this task looks at it a few times per
    limit, which costs nothing per chunk.
    """

    def __init__(self, limit: float | None, step_scope: anyio.CancelScope) -> None:
        self.limit = limit
        self.seen = 0
        self.paused = False
        self.fired = False
        self._step_scope = step_scope
        self._own_scope = anyio.CancelScope()

    def stop(self) -> None:
        self._own_scope.cancel()

    async def run(self) -> None:
        assert self.limit is not None
        tick = self.limit / 4
        last, quiet = self.seen, 0.0
        with self._own_scope:
            while True:
                await anyio.sleep(tick)
                if self.seen != last or self.paused:
                    last, quiet = self.seen, 0.0
                    continue
                quiet += tick
                if quiet >= self.limit:
                    self.fired = True
                    self._step_scope.cancel()
                    return


def _usage_record(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
