"""One prompt turn: steps of model calls, streamed to the editor, logged as they go.

A turn is a state machine (`TurnState`, its rules in `acp_bridge.loop.lifecycle`)::

    STARTING ──> STREAMING ──> RUNNING_TOOLS <──> AWAITING_EDITOR
        │            │  ^            │                  │
        │            │  └────────────┘                  │
        └────────────┴──────> SETTLING <────────────────┘
                                  │
                                  v
                                ENDED

Before each model request the turn may pass through COMPACTING (from
STARTING, RUNNING_TOOLS, or STREAMING after a request the provider refused
as too long; then to STREAMING, or to the ending): see `Turn._before_request`
and `acp_bridge.compaction.run`.  A ``/compact`` turn is only that.

What the turn is (a prompt, a regenerate, a ``/compact``, a slash command)
is its `TurnKind`, given to the constructor: nothing of a turn is set after
it is built, and its one recorder starts it as the kind says.

One place changes the state: `Turn._enter`, through the table.  One question
says whether the turn goes on: `Turn.over` (a stop was asked, or the ending
began); `Turn.ended` says the ending is recorded (the fence: nothing more
reaches the editor or the log).

It runs in its prompt's task (`acp_bridge.loop.prompts`), and every way out
goes through `Turn._end`, once: that records the ending
(`acp_bridge.loop.ending`, which also documents the synchronous Stop that
runs re-entrantly from ``poll_input()``), fences the turn, and answers the
prompt (``answer``, given by the prompt queue, which then frees the session's
next prompt).

A Stop cancels the turn's one cancel scope.  While STREAMING, the provider
stream is first aborted synchronously (`ProviderStream.abort`): then what was
delivered is exact, and the turn ends at once, from the task that read the
cancel.  In RUNNING_TOOLS or AWAITING_EDITOR, the work in flight
(`InFlight`) finishes its cleanup and the ending waits for it, shielded and
bounded by the cancel deadline (SETTLING).  If the turn does not end by the
deadline, the watchdog ends it (``forced``); the fence then keeps whatever the
stuck task does later away from the editor and the log (invariant I6).

This module is over 400 lines (about 500) on purpose: it is the turn's one
control flow (its states and their one writer, the steps, the compaction
triggers, the tool step, the one ending), readable top to bottom; what can
stand alone lives beside it: the rules (`lifecycle`), the ending's records
(`ending`), the hot loop of a stream (`stream`), usage (`usage`), the
compaction (`compact`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..compaction.shown import OpenCompaction
from ..errors import TurnFailed
from ..log.records import StopReason
from ..providers.base import (
    FinishReason,
    ModelRequest,
    ProviderError,
    ProviderStream,
    StreamIdleTimeout,
)
from ..tools.texts import unavailable_tool_text as unavailable_tool_text
from . import ending as endings
from .assembler import AssemblyError
from .inflight import InFlight
from .lifecycle import TRANSITIONS as TRANSITIONS
from .lifecycle import Ending
from .lifecycle import IllegalTransition as IllegalTransition
from .lifecycle import TurnConfig as TurnConfig
from .lifecycle import TurnKind as TurnKind
from .lifecycle import TurnState as TurnState
from .recorder import TurnRecorder
from .session_core import SessionCore
from .stop import stop_reason_for_finish
from .stream import IdleWatch, StepStream, consume
from .usage import estimate_usage, show_usage

if TYPE_CHECKING:
    # Both load off the start-up path (see `acp_bridge.server`); neither imports the loop.
    from ..context.windows import ModelInfo
    from ..tools.runner import ToolRunner

log = logging.getLogger("acp_bridge.turn")


T = TypeVar("T")
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class Turn:
    # The state; `_enter` is its only writer (through `TRANSITIONS`).
    state: TurnState = TurnState.STARTING
    # Is it over?  True from the moment a stop is asked (``cause``) or the
    # ending begins; the turn then starts nothing new.  Written by `cancel`
    # and `_enter` only (a plain attribute: the hot loop reads it per event).
    over: bool = False

    def __init__(
        self,
        session: SessionCore,
        number: int,
        kind: TurnKind,
        config: TurnConfig,
        spawn: Spawn,
        *,
        answer: Callable[[Turn], None] | None = None,
        started: Callable[[Turn], None] | None = None,
    ) -> None:
        """A turn of ``kind`` (`TurnKind`: a prompt, a regenerate, a
        ``/compact`` or a slash command), whole: nothing of it is changed
        after this.  ``answer`` is called the moment it ends."""
        self.session = session
        self.spawn = spawn
        self.number = number
        self.kind = kind
        self.config = config
        self.rec = TurnRecorder(session.log, number, kind)
        self.in_flight = InFlight()
        # Set once the turn has ended and answered.
        self.settled = anyio.Event()
        self._answer = answer
        self._started = started
        self.stop_reason: str | None = None
        self.error: TurnFailed | None = None
        self.cause: str | None = None
        self.forced = False
        self.scope = anyio.CancelScope()
        # The idle limit of a stream that went silent, once its watch fired
        # (it cancels ``scope``: see `_stream_step`).
        self.silent_for: float | None = None
        self.stream: StepStream | None = None
        # The live provider stream, while the hot loop iterates it.
        self.events: ProviderStream | None = None
        self._pending_tools: list[dict[str, Any]] = []
        self._tools: ToolRunner | None = None  # see `tools`
        # The id of the session/prompt request this turn answers.
        self.request_id: object = None
        # The system prompt of the turn's requests, and the model as of the
        # current step (window, output limit, price).
        self.system: str | None = None
        self.info: ModelInfo | None = None
        self.usage_shown = False
        # A compaction whose outcome is not logged yet; what this turn tried.
        self.open_compaction: OpenCompaction | None = None
        self._compaction_failed = False
        self._overflowed = False
        # The turn's prompt did not fit even after compaction: it leaves the history.
        self.left_out = False
        self.overflow_why = "it was compacted"

    @property
    def tools(self) -> ToolRunner:
        """Runs the step's tool calls; made when first asked for.  The runner
        refers back to its turn, so a turn that made one is freed by the
        garbage collector, not when its last reference goes: most turns run
        no tool, and leave nothing for the collector."""
        tools = self._tools
        if tools is None:
            from ..tools.runner import ToolRunner  # off the start-up path

            tools = self._tools = ToolRunner(self, self.session.tools)
        return tools

    @property
    def ended(self) -> bool:
        """The ending is recorded: nothing of this turn may reach the editor or the log."""
        return self.state is TurnState.ENDED

    def _enter(self, state: TurnState) -> None:
        """The one writer of ``state``: a move the table allows, or IllegalTransition."""
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"turn {self.number}: {self.state.value} -> {state.value}")
        self.state = state
        if state is TurnState.SETTLING or state is TurnState.ENDED:
            self.over = True

    # -- control (called from other tasks) ---------------------------------

    def cancel(self, cause: str) -> bool:
        """Ask the turn to stop; the first cause wins.  Returns True when the
        turn has not ended by the time this returns (the caller then bounds
        the wait with `watchdog`); False when it had ended or ended here."""
        if self.ended:
            return False
        if self.cause is None:
            self.cause = cause
        self.over = True
        events = self.events
        if self.state is TurnState.STREAMING and events is not None and events.abort():
            self._stop_synchronously()
        # Tools and editor requests in flight stop and produce what they have.
        self.in_flight.cancel()
        # The task unwinds afterwards (or, when the stream could not be
        # aborted, this is what stops it).
        self.scope.cancel()
        return not self.ended

    def _stop_synchronously(self) -> None:
        """The synchronous Stop (see "The synchronous Stop" in `acp_bridge.loop.ending`).

        Only the model stream was in flight, it is now closed, and what it
        delivered is known (the assembler is updated synchronously): the turn
        ends here, in the task that read the cancel, which may be the turn's
        own task inside ``poll_input()``; its `run` then finds it ended.
        """
        self.events = None
        self._end(Ending("stopped"))

    async def watchdog(self) -> None:
        """After a cancel, end the turn by the deadline even if it is stuck."""
        with anyio.move_on_after(self.config.cancel_deadline):
            await self.settled.wait()
            return
        if not self.ended:
            log.warning(
                "turn %d did not stop within %.1fs; abandoning it",
                self.number,
                self.config.cancel_deadline,
            )
            self._end(Ending("stopped", forced=True))

    # -- the turn ----------------------------------------------------------

    async def run(self) -> None:
        # The pace may have grown the pipe: a Stop must not wait behind a full one.
        self.session.outbox.narrow_stdout()
        self.rec.turn_start()
        if self._started is not None:
            self._started(self)
        reason: StopReason | None = None
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
            if self.scope.cancelled_caught and self.silent_for is not None:
                # The idle watch cancelled the turn: a failed request, not a stop.
                ending = Ending("failed", error=StreamIdleTimeout(self.silent_for))
            elif self.scope.cancelled_caught or reason is None:
                ending = Ending("stopped")
            else:
                ending = Ending("finished", reason=reason)
        if ending.how == "stopped" and not self.ended and len(self.in_flight):
            # Tools or editor requests were in flight: let them finish their
            # cleanup (real partial results, a permission answered as
            # cancelled) before the ending records them.
            self._enter(TurnState.SETTLING)
            if not await self.in_flight.settle(self.config.cancel_deadline):
                ending = Ending("stopped", forced=True)
        if not self.ended:  # else a synchronous Stop or the watchdog ended it
            self._end(ending)

    async def _steps(self) -> StopReason | None:
        """Run steps until a stop reason; None when the turn was stopped."""
        rec = self.rec
        session = self.session
        registry = session.tools.registry
        if not registry.specs_ready:
            # The registry's first turn imports the tools' pydantic models and
            # builds their JSON Schemas: tens of milliseconds, in a worker
            # thread so that the event loop (and a Stop right behind the
            # first prompt) is not held meanwhile.
            await anyio.to_thread.run_sync(registry.specs, abandon_on_cancel=True)
        tools = registry.specs()
        self.system = await session.context.system_prompt(tools)
        if self.kind.answer is not None:
            return await self.kind.answer(self)  # a slash command
        if self.kind.name == "compact":
            return await self._compact_now()
        while True:
            if self.over:
                return None  # stopped before this step: no model request at all
            if rec.step >= self.config.max_steps:
                return "max_turn_requests"
            self.info = await session.provider.model_info()
            await self._before_request()
            if self.over:
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
            if self.over:
                return None
            stop = stop_reason_for_finish(finish)
            if stop is None:
                self._enter(TurnState.RUNNING_TOOLS)
                await self._run_tools()
                if self.over:
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
        tools = session.tools.registry.specs()
        records = session.log.records
        estimate = session.context.estimate
        tokens = estimate.next_request_tokens(records, session.history(), self.system, tools)
        if tokens <= limit or self._compaction_failed:
            return
        log.info("turn %d: about %d tokens, over %d: compacting", self.number, tokens, limit)
        from ..compaction.run import compact  # loaded off the start-up path (acp_bridge.server)

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
        from ..compaction.run import compact

        endings.fail_step(self, exc)
        self._enter(TurnState.COMPACTING)
        outcome = await compact(self, "overflow")
        if outcome.status != "completed":
            self.left_out = True
            self.overflow_why = (
                "there is nothing left to compact"
                if outcome.error is None
                else f"it could not be compacted ({outcome.error.message})"
            )
            raise exc

    async def _compact_now(self) -> StopReason:
        """A ``/compact`` turn: compact now, and answer with what happened."""
        from ..compaction.run import compact
        from ..compaction.shown import nothing_to_compact_update

        self.info = await self.session.provider.model_info()
        self._enter(TurnState.COMPACTING)
        outcome = await compact(self, "command", self.kind.instructions)
        if outcome.status == "nothing":
            self.emit(nothing_to_compact_update())
        return "end_turn"

    async def _stream_step(self) -> FinishReason | None:
        session = self.session
        stream = StepStream()
        self.stream = stream
        tools = session.tools.registry.specs()
        request = ModelRequest(messages=session.history(), tools=tools, system=self.system)
        self.usage_shown = False
        self.rec.stream_start(stream.attempt, stream.message_id, session.provider.name)
        # A silent stream cancels the turn's own scope (its deadline): the
        # cancellation then leaves the turn, and `run` tells it from a stop by
        # ``silent_for``.
        idle = IdleWatch(self.config.idle_timeout, self.scope)
        idle.start()
        session.outbox.add_pre_flush(stream.asm.compact)
        try:
            await consume(self, request, stream, idle)
        finally:
            self.events = None
            session.outbox.remove_pre_flush(stream.asm.compact)
            session.outbox.unmerge_chunks(stream.chunk_prefixes)
            idle.stop()
            if idle.fired and self.cause is None:
                self.silent_for = idle.limit or 0.0
        if self.silent_for is not None:
            raise StreamIdleTimeout(idle.limit or 0.0)
        if self.over:
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

    def _commit(self, stream: StepStream) -> FinishReason:
        """A stream that ended with its finish event becomes the step's assistant message."""
        asm = stream.asm
        finish = asm.finish
        assert finish is not None  # see _stream_step
        content = asm.blocks()  # AssemblyError: a malformed stream, see run()
        if not self.usage_shown:
            estimate_usage(self, content)
        self.stream = None
        if content:
            self.rec.message(content, finish=finish, usage=asm.usage)
        else:
            self.rec.attempt("empty", [])
        calls = asm.completed_tool_calls()
        self._pending_tools = calls if finish == "tool_use" else []
        if finish != "tool_use":
            endings.close_open_tools(self, "model ended the turn without running this tool")
        return finish

    # -- tools ---------------------------------------------------------------

    async def _run_tools(self) -> None:
        """RUNNING_TOOLS: run the step's tool calls (`acp_bridge.tools.runner`).

        Each call runs under ``self.in_flight.track(...)`` and its editor
        requests go through `await_editor`; on a Stop a running tool produces
        its real (possibly partial) result, and the ending gives the calls not
        yet dispatched their aborted results.
        """
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
            if self.state is TurnState.AWAITING_EDITOR:  # else the turn is ending
                self._enter(TurnState.RUNNING_TOOLS)

    def show_tool(self, update: dict[str, Any]) -> None:
        """Record a tool call announcement or update, then send it (also used
        by the running tools)."""
        fields = {key: value for key, value in update.items() if key != "sessionUpdate"}
        if update["sessionUpdate"] == "tool_call":
            self.rec.tool_announce(fields)
        else:
            self.rec.tool_update(fields)
        self.emit(update)

    def emit(self, update: dict[str, Any]) -> None:
        if not self.ended:
            self.session.outbox.send(self.session.frames.update(update))

    def show_context_usage(self, used: int, input_tokens: int, output_tokens: int) -> None:
        """A usage_update between steps (after a compaction): ``used`` is the history's
        estimated size; the tokens are those of the summary request (for its cost)."""
        show_usage(self, input_tokens, output_tokens, used=used, step=False)

    # -- the one ending ------------------------------------------------------

    def abort_undispatched(self) -> None:
        """Complete calls of the step that were never dispatched: ABORTED_BEFORE_DISPATCH."""
        if self._pending_tools or (self._tools is not None and self._tools.queue):
            tools = self.tools
            tools.queue.extend(self._pending_tools)
            tools.abort_rest()
        self._pending_tools = []

    def _end(self, ending: Ending) -> None:
        """Record how the turn ended, fence it, and answer the prompt.  Once
        (see `acp_bridge.loop.ending`, "The synchronous Stop").

        The turn settles (and the editor gets its answer) even if recording
        fails halfway: a prompt is never left unanswered.
        """
        assert not self.ended, f"turn {self.number}: its ending ran twice"
        if ending.how in ("failed", "internal") and self.over:
            ending = Ending("stopped")  # a stop raced with the failure: the user's decision wins
        if self.state is not TurnState.SETTLING:
            self._enter(TurnState.SETTLING)  # the fence: a Stop read meanwhile ends nothing
        self.forced = ending.forced
        try:
            endings.record_ending(self, ending)
        except Exception:
            log.exception("turn %d: recording its end failed", self.number)
            if self.stop_reason is None and self.error is None:
                self.error = TurnFailed(
                    "Internal error", {"detail": "recording the end of the turn failed"}
                )
        finally:
            self.rec.closed = True
            self._enter(TurnState.ENDED)
            self.settled.set()
            if self._answer is not None:
                self._answer(self)
