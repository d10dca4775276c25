"""One prompt turn: steps of model calls, streamed to the editor, logged as they go.

A turn is a state machine (`TurnState`)::

    STARTING ──> STREAMING ──> RUNNING_TOOLS <──> AWAITING_EDITOR
        │            │  ^            │                  │
        │            │  └────────────┘                  │
        └────────────┴──────> SETTLING <────────────────┘
                                  │
                                  v
                                ENDED

Before each model request the turn may pass through COMPACTING (from
STARTING, RUNNING_TOOLS, or STREAMING after a request the provider refused
as too long; then to STREAMING, or to the ending): see `_before_request`
and `acp_bridge.loop.compact`.  A ``/compact`` turn is only that.

It runs as its own task, and every way out goes through `Turn._end`, once:
that records the ending (through the turn's one `TurnRecorder`), fences the
turn, and answers the prompt (``answer``, given by the prompt queue).  The
endings, each recorded differently (invariant I5):

* finished: the model ended the turn (an ACP stop reason);
* stopped, cause ``user`` (``session/cancel``): the delivered prefix of the
  open stream becomes an interrupted ``assistant/message``; nothing visible
  becomes an ``assistant/attempt`` with outcome ``empty``.  Answers
  ``cancelled``;
* stopped, cause ``disconnected`` (stdin EOF, broken stdout, a signal): the
  prefix is kept only as an attempt, never in model history;
* failed: a provider error or an idle stall; the attempt and an
  ``agent/request-error`` are logged, the prompt gets an error;
* internal: a bug in this loop; recorded as ``agent/internal-error`` with
  turn/end reason ``internal``, never blamed on the provider.

A Stop cancels the turn's one cancel scope.  While STREAMING, the provider
stream is first aborted synchronously (`ProviderStream.abort`): then what was
delivered is exact, and the turn ends at once, from the task that read the
cancel.  In RUNNING_TOOLS or AWAITING_EDITOR, the work in flight
(`InFlight`) finishes its cleanup and the ending waits for it, shielded and
bounded by the cancel deadline (SETTLING).  If the turn does not end by the
deadline, the watchdog ends it (``forced``); the fence then keeps whatever the
stuck task does later away from the editor and the log (invariant I6).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.lowlevel
import orjson

from ..jsonrpc.errors import RpcError
from ..log.replay import retry_notice
from ..providers.base import (
    ModelRequest,
    ProviderError,
    ProviderStream,
    ReasoningDelta,
    Retrying,
    StreamIdleTimeout,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from ..tools.texts import unavailable_tool_text as unavailable_tool_text
from .assembler import AssemblyError, StreamAssembler
from .inflight import InFlight
from .recorder import TurnRecorder
from .stop import stop_reason_for_finish
from .updates import CHUNK_SUFFIX

if TYPE_CHECKING:
    from ..context.windows import ModelInfo
    from ..tools.runner import ToolRunner
    from .compact import OpenCompaction
    from .session import Session

log = logging.getLogger("acp_bridge.turn")


# Longest stretch of stream handling between two yields to the event loop.
TIME_SLICE: Final = 50e-6
# Longest stretch of stream handling between two looks at stdin: a Stop is
# handled within this much of streaming after it arrives (a look costs under
# a microsecond; the loop itself reads stdin only between slices).
POLL_SLICE: Final = 15e-6


@dataclass(frozen=True, slots=True)
class TurnConfig:
    max_steps: int = 25
    cancel_deadline: float = 5.0
    idle_timeout: float | None = 300.0
    # Longest a tool call may run before it is stopped (seconds).
    tool_timeout: float = 300.0
    # Secret-looking variables let through to commands and not redacted
    # from tool results (--pass-env, ACP_BRIDGE_PASS_ENV).
    pass_env: tuple[str, ...] = ()


class TurnState(enum.Enum):
    STARTING = "starting"
    COMPACTING = "compacting"
    STREAMING = "streaming"
    RUNNING_TOOLS = "running_tools"
    AWAITING_EDITOR = "awaiting_editor"
    SETTLING = "settling"
    ENDED = "ended"


S = TurnState
# The legal transitions; `Turn._enter` refuses any other (a bug, recorded as internal).
TRANSITIONS: Final[dict[TurnState, frozenset[TurnState]]] = {
    S.STARTING: frozenset({S.STREAMING, S.COMPACTING, S.SETTLING, S.ENDED}),
    S.COMPACTING: frozenset({S.STREAMING, S.SETTLING, S.ENDED}),
    S.STREAMING: frozenset({S.RUNNING_TOOLS, S.COMPACTING, S.SETTLING, S.ENDED}),
    S.RUNNING_TOOLS: frozenset(
        {S.STREAMING, S.COMPACTING, S.AWAITING_EDITOR, S.SETTLING, S.ENDED}
    ),
    S.AWAITING_EDITOR: frozenset({S.RUNNING_TOOLS, S.SETTLING, S.ENDED}),
    S.SETTLING: frozenset({S.ENDED}),
    S.ENDED: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ends.  ``how``: finished, stopped, failed or internal."""

    how: str
    reason: str | None = None  # finished: the ACP stop reason
    error: BaseException | None = None  # failed: a ProviderError; internal: the bug
    forced: bool = False


class _Stream:
    """The open model stream of the current step."""

    __slots__ = ("asm", "attempt", "chunk_prefixes", "message_id")

    def __init__(self) -> None:
        self.attempt = "att_" + uuid.uuid4().hex[:16]
        # One id for the model response: its reasoning and its text are one
        # assistant message to the editor, as they are in the history.
        self.message_id = "msg_" + uuid.uuid4().hex[:16]
        self.asm = StreamAssembler()
        # How this stream's text and reasoning frames start (see `Turn._retract_queued`).
        self.chunk_prefixes: tuple[bytes, ...] = ()


T = TypeVar("T")
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class Turn:
    def __init__(
        self,
        session: Session,
        number: int,
        prompt: list[dict[str, Any]],
        config: TurnConfig,
        spawn: Spawn,
        *,
        raw_prompt: list[dict[str, Any]] | None = None,
        answer: Callable[[Turn], None] | None = None,
    ) -> None:
        self.session = session
        self.spawn = spawn
        self.number = number
        self.prompt = prompt
        self.raw_prompt = prompt if raw_prompt is None else raw_prompt
        self.config = config
        self.state = TurnState.STARTING
        self.rec = TurnRecorder(session.log, number)
        self.in_flight = InFlight()
        self.settled = anyio.Event()
        self._answer = answer
        self.stop_reason: str | None = None
        self.error: RpcError | None = None
        self.cause: str | None = None
        self.forced = False
        self.scope = anyio.CancelScope()
        self.stream: _Stream | None = None
        # The live provider stream, while the hot loop iterates it.
        self._events: ProviderStream | None = None
        self._pending_tools: list[dict[str, Any]] = []
        # Runs the step's tool calls (None for a session without tools).
        self.tools: ToolRunner | None = None
        if session.tools is not None:
            from ..tools.runner import ToolRunner

            self.tools = ToolRunner(self, session.tools)
        # The id of the session/prompt request this turn answers.
        self.request_id: object = None
        # The system prompt of the turn's requests, and the model as of the
        # current step (window, output limit, price).
        self.system: str | None = None
        self.info: ModelInfo | None = None
        self._usage_shown = False
        # A compaction whose outcome is not logged yet; what this turn tried.
        self.open_compaction: OpenCompaction | None = None
        self._compaction_failed = False
        self._overflowed = False
        # The turn's prompt did not fit even after compaction: it leaves the history.
        self.left_out = False
        self._overflow_why = "it was compacted"
        # A command turn: ("compact", its instructions).
        self.command: tuple[str, str | None] | None = None

    @property
    def fenced(self) -> bool:
        """Nothing of this turn may reach the editor or the log any more."""
        return self.state is TurnState.SETTLING or self.state is TurnState.ENDED

    def _enter(self, state: TurnState) -> None:
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"turn {self.number}: {self.state.value} -> {state.value}")
        self.state = state

    # -- control (called from other tasks) ---------------------------------

    def cancel(self, cause: str) -> bool:
        """Ask the turn to stop; the first cause wins.  Returns False if already ended."""
        if self.settled.is_set():
            return False
        if self.cause is None:
            self.cause = cause
        events = self._events
        if self.state is TurnState.STREAMING and events is not None and events.abort():
            # Only the model stream was in flight and it is now closed, and
            # what it delivered is known (the assembler is updated
            # synchronously): end here rather than after the task unwinds.
            self._events = None
            self._end(Ending("stopped"))
        # Tools and editor requests in flight stop and produce what they have.
        self.in_flight.cancel()
        # The task unwinds afterwards (or, when the stream could not be
        # aborted, this is what stops it).
        self.scope.cancel()
        return True

    async def watchdog(self) -> None:
        """After a cancel, end the turn by the deadline even if it is stuck."""
        with anyio.move_on_after(self.config.cancel_deadline):
            await self.settled.wait()
            return
        if not self.settled.is_set():
            log.warning(
                "turn %d did not stop within %.1fs; abandoning it",
                self.number,
                self.config.cancel_deadline,
            )
            self._end(Ending("stopped", forced=True))

    # -- the turn ----------------------------------------------------------

    async def run(self) -> None:
        # A replay may have widened stdout: a Stop must not wait behind a full one.
        self.session.outbox.narrow_stdout()
        self.rec.turn_start(self.prompt, self.raw_prompt)
        reason: str | None = None
        ending: Ending
        try:
            with self.scope:
                reason = await self._steps()
        except ProviderError as exc:
            ending = Ending("failed", error=exc)
        except AssemblyError as exc:
            ending = Ending(
                "failed", error=ProviderError(f"malformed model stream: {exc}", kind="protocol")
            )
        except Exception as exc:
            log.exception("turn %d failed", self.number)
            ending = Ending("internal", error=exc)
        else:
            if self.scope.cancelled_caught or reason is None:
                ending = Ending("stopped")
            else:
                ending = Ending("finished", reason=reason)
        if ending.how == "stopped" and not self.fenced and len(self.in_flight):
            # Tools or editor requests were in flight: let them finish their
            # cleanup (real partial results, a permission answered as
            # cancelled) before the ending records them.
            self._enter(TurnState.SETTLING)
            if not await self.in_flight.settle(self.config.cancel_deadline):
                ending = Ending("stopped", forced=True)
        self._end(ending)

    async def _steps(self) -> str | None:
        """Run steps until a stop reason; None when the turn was stopped."""
        # The context machinery loads off the start-up path (see acp_bridge.server).
        from ..context.windows import model_info_of

        rec = self.rec
        session = self.session
        tools = () if session.tools is None else session.tools.registry.specs()
        self.system = await session.context.system_prompt(tools)
        if self.command is not None:
            return await self._command()
        while True:
            if self.cause is not None:
                return None  # stopped before this step: no model request at all
            if rec.step >= self.config.max_steps:
                return "max_turn_requests"
            self.info = await model_info_of(session.provider)
            await self._before_request()
            if self.cause is not None or self.fenced:
                return None
            rec.step_start()
            self._enter(TurnState.STREAMING)
            try:
                finish = await self._stream_step()
            except ProviderError as exc:
                if not self._too_long(exc):
                    raise
                await self._compact_after_rejection(exc)
                continue  # the same request again, now compacted
            if self.cause is not None or self.fenced:
                return None
            stop = stop_reason_for_finish(finish)
            if stop is None:
                self._enter(TurnState.RUNNING_TOOLS)
                await self._run_tools()
                if self.cause is not None or self.fenced:
                    return None
            rec.step_end(stop or "tool_use")
            if stop is not None:
                return stop

    # -- the context window --------------------------------------------------------

    async def _before_request(self) -> None:
        """Compact first if the next request would pass the threshold of the window.

        The limit is the threshold's share of the window, or the window less
        the room the model's answer needs, whichever is lower (a window smaller
        than that room is a setting to fix: then the threshold alone).  One
        failed attempt is enough for a turn: its requests then go as they are.
        """
        info, session = self.info, self.session
        assert info is not None
        window = session.context.window(info)
        limit = session.context.config.compact_threshold * window
        if window > info.max_output_tokens:
            limit = min(limit, window - info.max_output_tokens)
        tools = () if session.tools is None else session.tools.registry.specs()
        records = session.log.records
        estimate = session.context.estimate
        tokens = estimate.next_request_tokens(records, session.history(), self.system, tools)
        if tokens <= limit or self._compaction_failed:
            return
        log.info("turn %d: about %d tokens, over %d: compacting", self.number, tokens, limit)
        from .compact import compact  # loaded off the start-up path (acp_bridge.server)

        self._enter(TurnState.COMPACTING)
        outcome = await compact(self, "auto")
        self._compaction_failed = outcome.status != "completed"

    def _too_long(self, exc: ProviderError) -> bool:
        """A request refused as too long before anything of it was shown: compact, retry once."""
        stream = self.stream
        shown = stream is not None and (
            stream.asm.interrupted_blocks() or stream.asm.completed_tool_calls()
        )
        if exc.kind != "context_length" or shown or self.rec.open_tools:
            return False
        if self._overflowed:
            self.left_out = True  # compacted, and still too long
            return False
        self._overflowed = True
        return True

    async def _compact_after_rejection(self, exc: ProviderError) -> None:
        """Log the refused request as a failed step, then compact; the caller retries."""
        from .compact import compact

        self._fail_step(exc)
        self._enter(TurnState.COMPACTING)
        outcome = await compact(self, "overflow")
        if outcome.status != "completed":
            self.left_out = True
            self._overflow_why = (
                "there is nothing left to compact"
                if outcome.error is None
                else f"it could not be compacted ({outcome.error.message})"
            )
            raise exc

    async def _command(self) -> str:
        """A ``/compact`` turn: compact now, and answer with what happened."""
        from ..context.windows import model_info_of
        from ..log.compaction import nothing_to_compact_update
        from .compact import compact

        assert self.command is not None
        self.info = await model_info_of(self.session.provider)
        self._enter(TurnState.COMPACTING)
        outcome = await compact(self, "command", self.command[1])
        if outcome.status == "nothing":
            self.emit(nothing_to_compact_update())
        return "end_turn"

    async def _stream_step(self) -> str | None:
        session = self.session
        stream = _Stream()
        self.stream = stream
        tools = () if session.tools is None else session.tools.registry.specs()
        request = ModelRequest(messages=session.history(), tools=tools, system=self.system)
        self._usage_shown = False
        self.rec.stream_start(stream.attempt, stream.message_id, session.provider.name)
        step_scope = anyio.CancelScope()
        idle = _IdleWatch(self.config.idle_timeout, step_scope)
        if idle.limit is not None:
            self.spawn(idle.run)
        session.outbox.add_pre_flush(stream.asm.compact)
        try:
            with step_scope:
                await self._consume(request, stream, idle)
        finally:
            self._events = None
            session.outbox.remove_pre_flush(stream.asm.compact)
            session.outbox.unmerge_chunks(stream.chunk_prefixes)
            idle.stop()
        if idle.fired:
            raise StreamIdleTimeout(idle.limit or 0.0)
        if self.cause is not None or self.fenced:
            return None  # stopped: the turn's ending records what was delivered
        if stream.asm.finish is None:
            # Whatever the provider: a stream that ends without saying why
            # the model stopped is cut short, never a finished reply.
            raise ProviderError(
                f"the {session.provider.name} stream ended without its finish event; "
                "the reply is incomplete",
                kind="cut",
                retryable=True,
            )
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
        stream.chunk_prefixes = tuple(prefix for prefix, _ in prefixes.values())
        outbox.merge_chunks(stream.chunk_prefixes, CHUNK_SUFFIX)
        feed, send, delta = stream.asm.feed, outbox.send, self.rec.delta
        poll_input = outbox.poll_input
        dumps = orjson.dumps
        clock = time.perf_counter
        poll_at = clock() + POLL_SLICE
        yield_at = poll_at + TIME_SLICE
        async with session.provider.stream(request) as events:
            self._events = events
            async for ev in events:
                idle.seen += 1
                if clock() > poll_at:
                    # A Stop waiting on stdin is handled now (it ends this turn
                    # synchronously), not after this task's slice.
                    poll_input()
                    if self.cause is None and clock() > yield_at:
                        # Fairness: a provider that hands out many events
                        # without waiting would otherwise keep the loop from
                        # running the writer and the other sessions.
                        await anyio.lowlevel.checkpoint()
                        yield_at = clock() + TIME_SLICE
                    poll_at = clock() + POLL_SLICE
                if self.cause is not None:
                    # A stop was read while the provider yielded: leave now
                    # rather than wait for the cancellation to be delivered.
                    return
                kind = type(ev)
                chunk = prefixes.get(kind)
                if chunk is not None:
                    feed(ev)
                    prefix, block_kind = chunk
                    text_ev: TextDelta = ev  # type: ignore[assignment]  # or ReasoningDelta: same fields
                    send(prefix + dumps(text_ev.text) + CHUNK_SUFFIX)
                    delta(text_ev.index, block_kind, text_ev.text)
                    if outbox.backlog > outbox.high_water:
                        # Waiting for the editor to read is not provider silence.
                        idle.paused = True
                        try:
                            await outbox.wait_writable()
                        finally:
                            idle.paused = False
                elif kind is Retrying:
                    self._retrying(ev)  # type: ignore[arg-type]
                    # The provider now waits before its retry: that wait is
                    # not a silent stream.
                    idle.grace, idle.grace_seen = ev.delay, idle.seen  # type: ignore[union-attr]
                else:
                    feed(ev)
                    if kind is ToolCallStart:
                        self._announce_tool(ev)  # type: ignore[arg-type]
                    elif kind is ToolCallDelta:
                        delta(ev.index, "tool_args", ev.args)  # type: ignore[union-attr]
                    elif kind is Usage:
                        self._report_usage(ev)  # type: ignore[arg-type]
            # The stream is complete: from here a stop no longer aborts it.
            self._events = None
        if stream.asm.finish is None:
            stream.asm.end_stream()

    def _commit(self, stream: _Stream) -> str:
        """A stream that ended with its finish event becomes the step's assistant message."""
        asm = stream.asm
        finish = asm.finish
        assert finish is not None  # see _stream_step
        content = asm.blocks()  # AssemblyError: a malformed stream, see run()
        if not self._usage_shown:
            self._estimate_usage(content)
        self.stream = None
        if content:
            self.rec.message(content, interrupted=False, finish=finish, usage=asm.usage)
        else:
            self.rec.attempt("empty", [])
        calls = asm.completed_tool_calls()
        self._pending_tools = calls if finish == "tool_use" else []
        if finish != "tool_use":
            self._close_open_tools("model ended the turn without running this tool")
        return finish

    def _retrying(self, ev: Retrying) -> None:
        """The provider retries a failed request itself: log it, tell the user."""
        fields = self.rec.request_error(ev.error, retry=(ev.attempt, ev.delay))
        self._emit(retry_notice(fields))

    # -- tools ---------------------------------------------------------------

    async def _run_tools(self) -> None:
        """RUNNING_TOOLS: run the step's tool calls (`acp_bridge.tools.runner`).

        Each call runs under ``self.in_flight.track(...)`` and its editor
        requests go through `await_editor`; on a Stop a running tool produces
        its real (possibly partial) result, and the ending gives the calls not
        yet dispatched their aborted results.
        """
        if self.tools is None:
            self._answer_tool_calls()
            return
        calls, self._pending_tools = self._pending_tools, []
        await self.tools.run(calls)

    async def await_editor(self, label: str, request: Callable[[], Awaitable[T]]) -> T:
        """AWAITING_EDITOR: a request to the editor (a permission, ``fs/*``,
        ``terminal/*``) made while running tools.  A Stop cancels it; the
        turn's ending waits for it to unwind (see `InFlight.settle`)."""
        with self.awaiting_editor():
            async with self.in_flight.track(label):
                return await request()

    @contextlib.contextmanager
    def awaiting_editor(self) -> Iterator[None]:
        """The state while the body waits for the editor (see `await_editor`)."""
        self._enter(TurnState.AWAITING_EDITOR)
        try:
            yield
        finally:
            if self.state is TurnState.AWAITING_EDITOR:
                self.state = TurnState.RUNNING_TOOLS

    def _announce_tool(self, ev: ToolCallStart) -> None:
        tools = self.session.tools
        tool = None if tools is None else tools.registry.get(ev.name)
        self.show_tool(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": ev.id,
                "title": ev.name,
                "kind": "other" if tool is None else tool.kind,
                "status": "pending",
            }
        )

    def _answer_tool_calls(self) -> None:
        rec = self.rec
        for call in self._pending_tools:
            text = unavailable_tool_text(call["name"])
            rec.tool_call(call["id"], call["name"], call["input"], "unavailable")
            rec.tool_result(call["id"], [{"type": "text", "text": text}], is_error=True)
            self.show_tool(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call["id"],
                    "status": "failed",
                    "rawInput": call["input"],
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                }
            )
        self._pending_tools = []

    def _close_open_tools(self, why: str) -> None:
        """Every tool call announced to the editor gets a final status."""
        for tool_id in list(self.rec.open_tools):
            self.show_tool(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": tool_id,
                    "status": "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": why}}],
                }
            )

    def show_tool(self, update: dict[str, Any]) -> None:
        """Record a tool call announcement or update, then send it (also used
        by the running tools)."""
        fields = {key: value for key, value in update.items() if key != "sessionUpdate"}
        if update["sessionUpdate"] == "tool_call":
            self.rec.tool_announce(fields)
        else:
            self.rec.tool_update(fields)
        self._emit(update)

    def _report_usage(self, usage: Usage) -> None:
        """A usage_update from what the provider counted for this request and its answer
        (never a sum over requests), with the session's window and cost so far."""
        context = self.session.context
        if usage.context_window:
            context.reported_window = usage.context_window
        self._show_usage(usage.input_tokens, usage.output_tokens)

    def _estimate_usage(self, content: list[dict[str, Any]]) -> None:
        """A response without a usage report: estimate it (real models only)."""
        from ..context.estimate import estimate_json, estimate_request

        info = self.info
        if info is None or not info.estimate_usage:
            return
        session = self.session
        tools = () if session.tools is None else session.tools.registry.specs()
        sent = estimate_request(session.history(), self.system, tools)
        self._show_usage(sent, estimate_json(content))

    def _show_usage(
        self, input_tokens: int, output_tokens: int, *, used: int | None = None, step: bool = True
    ) -> None:
        info = self.info
        if info is None:
            return
        context = self.session.context
        if used is None:
            used = input_tokens + output_tokens
        size = context.window(info)
        extra = context.add_cost(info, input_tokens, output_tokens)
        self.rec.usage_update(used, size, step=step, **extra)
        self._emit({"sessionUpdate": "usage_update", "used": used, "size": size, **extra})
        self._usage_shown = True

    def _emit(self, update: dict[str, Any]) -> None:
        if not self.rec.closed:
            self.session.outbox.send(self.session.frames.update(update))

    emit = _emit

    def show_context_usage(self, used: int, input_tokens: int, output_tokens: int) -> None:
        """A usage_update between steps (after a compaction): ``used`` is the history's
        estimated size; the tokens are those of the summary request (for its cost)."""
        self._show_usage(input_tokens, output_tokens, used=used, step=False)

    # -- the one ending ------------------------------------------------------

    def _end(self, ending: Ending) -> None:
        """Record how the turn ended, fence it, and answer the prompt.  Once.

        The turn settles (and the editor gets its answer) even if recording
        fails halfway: a prompt is never left unanswered.
        """
        if self.state is TurnState.ENDED:
            return
        if ending.how in ("failed", "internal") and self.cause is not None:
            ending = Ending("stopped")  # a stop raced with the failure: the user's decision wins
        self.state = TurnState.SETTLING
        self.forced = ending.forced
        try:
            if ending.how == "finished":
                assert ending.reason is not None
                self.rec.turn_end(ending.reason, forced=False)
                self.stop_reason = ending.reason
            elif ending.how == "stopped":
                self._record_stop(forced=ending.forced)
            else:
                self._record_failure(ending)
        except Exception:
            log.exception("turn %d: recording its end failed", self.number)
            if self.stop_reason is None and self.error is None:
                self.error = RpcError.internal("recording the end of the turn failed")
        finally:
            self.rec.closed = True
            self.state = TurnState.ENDED
            self.settled.set()
            if self._answer is not None:
                self._answer(self)

    def _record_stop(self, *, forced: bool) -> None:
        """A user stop or a disconnect: commit what was delivered."""
        user_stop = self.cause == "user"
        outcome = "cancelled" if user_stop else "disconnected"
        self.stop_reason = "cancelled"
        self._close_compaction("cancelled")
        self._abort_undispatched()
        self._close_open_tools("cancelled before it ran" if user_stop else "disconnected")
        stream = self.stream
        if stream is not None:
            self.session.outbox.remove_pre_flush(stream.asm.compact)
            self._retract_queued(stream)
            blocks = stream.asm.interrupted_blocks()
            if user_stop and blocks:
                self.rec.message(blocks, interrupted=True, finish=None, usage=stream.asm.usage)
            else:
                self.rec.attempt("empty" if user_stop else "disconnected", blocks)
            self.stream = None
        self._abort_unanswered()
        self.rec.step_end(outcome)
        self.rec.turn_end(outcome, forced=forced)

    def _retract_queued(self, stream: _Stream) -> None:
        """Chunks still waiting in the outbox (the writer has not taken them)
        are taken back: the editor never gets them, so the stopped message
        holds what it does get, and the answer has less to wait behind.

        They are exactly the chunks not yet in a delta record: each batch the
        writer takes carries the delta record of its chunks, and any other
        record of the session writes the pending delta first (those chunks
        then stay, and are delivered).
        """
        slog = self.rec.log
        tails = slog.unrecorded_text()
        count = sum(map(len, tails.values()))
        if not count:
            return
        if not stream.asm.can_retract(tails):  # a bug: then everything is delivered
            log.error("turn %d: the queued chunks do not match the stream", self.number)
            return
        if self.session.outbox.retract(stream.chunk_prefixes, count):
            slog.drop_unrecorded()
            stream.asm.retract(tails)
            log.debug("turn %d: %d queued chunk(s) taken back on a stop", self.number, count)

    def _abort_undispatched(self) -> None:
        """Complete calls of the step that were never dispatched: ABORTED_BEFORE_DISPATCH."""
        if self.tools is not None:
            self.tools.queue.extend(self._pending_tools)
            self.tools.abort_rest()
        self._pending_tools = []

    def _abort_unanswered(self) -> None:
        """Tool calls dispatched but never answered get an aborted result."""
        for call_id, name in list(self.rec.unanswered.items()):
            text = f"Tool {name!r} was stopped before it returned a result."
            self.rec.tool_result(call_id, [{"type": "text", "text": text}], is_error=True)

    def _close_compaction(self, status: str, **fields: Any) -> None:
        """The ending of a turn interrupted mid-compaction: the compaction's outcome."""
        opened, self.open_compaction = self.open_compaction, None
        if opened is None:
            return
        record = self.rec.compaction(
            compaction_id=opened.compaction_id,
            attempt=opened.attempt,
            trigger=opened.trigger,
            status=status,
            **fields,
        )
        if record:
            from .compact import show

            show(self, record)

    def _fail_step(self, exc: ProviderError) -> None:
        """The step's request failed: its attempt and the error are logged, the step ends."""
        rec = self.rec
        stream = self.stream
        attempt = stream.attempt if stream is not None else None
        if stream is not None:
            outcome = "timed_out" if isinstance(exc, StreamIdleTimeout) else "provider_error"
            rec.attempt(outcome, stream.asm.interrupted_blocks())
            self.stream = None
        rec.request_error(exc, attempt=attempt)
        rec.step_end("timed_out" if isinstance(exc, StreamIdleTimeout) else "provider_error")

    def _record_failure(self, ending: Ending) -> None:
        """A provider error, an idle stall, or our own bug: keep the attempt, never the content."""
        rec = self.rec
        exc = ending.error
        internal = ending.how == "internal" or not isinstance(exc, ProviderError)
        timed_out = isinstance(exc, StreamIdleTimeout)
        if self.open_compaction is not None:
            error = {"kind": "internal", "message": "the agent failed during the compaction"}
            if isinstance(exc, ProviderError):
                error = exc.to_record()
            self._close_compaction("failed", error=error)
        stream = self.stream
        attempt = stream.attempt if stream is not None else None
        self._abort_undispatched()
        self._close_open_tools("the agent failed" if internal else "the model request failed")
        if stream is not None:
            outcome = "internal" if internal else "timed_out" if timed_out else "provider_error"
            rec.attempt(outcome, stream.asm.interrupted_blocks())
            self.stream = None
        self._abort_unanswered()
        if internal:
            assert exc is not None
            rec.internal_error(exc)
            rec.step_end("internal")
            rec.turn_end("internal", forced=False)
            self.error = RpcError(
                -32603,
                f"Internal error in the agent: {type(exc).__name__}",
                {"kind": "internal"},
            )
            return
        assert isinstance(exc, ProviderError)
        if rec.step_open:
            rec.request_error(exc, attempt=attempt)
            rec.step_end("timed_out" if timed_out else "provider_error")
        rec.turn_end("error", forced=False, left_out=self.left_out)
        message = f"Model request failed: {exc.message}"
        if self.left_out:
            message += (
                f". This message does not fit the model's context window ({self._overflow_why}), "
                "so it was left out of the conversation: the session goes on without it. "
                "Send something shorter, or attach less."
            )
        self.error = RpcError(
            -32603,
            message,
            {
                "kind": exc.kind,
                "retryable": exc.retryable,
                "status": exc.status,
                "attempt": attempt,
            },
        )


class _IdleWatch:
    """Cancels the step's scope when no stream event arrives for ``limit`` seconds.

    The hot loop only bumps a counter; this task looks at it a few times per
    limit, which costs nothing per chunk.
    """

    def __init__(self, limit: float | None, step_scope: anyio.CancelScope) -> None:
        self.limit = limit
        self.seen = 0
        self.paused = False
        # Extra seconds of silence allowed while no event has followed the
        # one counted as ``grace_seen`` (a provider's announced wait before a
        # retry).
        self.grace = 0.0
        self.grace_seen = -1
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
                allowed = self.limit + (self.grace if self.seen == self.grace_seen else 0.0)
                if quiet >= allowed:
                    self.fired = True
                    self._step_scope.cancel()
                    return
