"""The open model stream of one step: the hot loop, and the watch that ends a silent one.

`consume` is the hot loop of a turn (`acp_bridge.loop.turn.Turn._stream_step`
calls it): each provider event is fed to the assembler, sent to the editor
and logged, in that order.  Between slices it looks at stdin
(``poll_input()``), where a Stop may end the turn synchronously (see
`acp_bridge.loop.ending`, "The synchronous Stop"); it then sees ``turn.over``
and leaves.  What it needs of the turn is `StreamingTurn`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel
import orjson

from ..log.replay import retry_notice
from ..providers.base import (
    ModelRequest,
    ProviderStream,
    ReasoningDelta,
    Retrying,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from ..update_builders import tool_call
from .assembler import StreamAssembler
from .output import TurnOutput
from .usage import UsageTurn, report_usage

__all__ = [
    "IdleWatch",
    "StepStream",
    "StreamingTurn",
    "consume",
]

# Longest stretch of stream handling between two yields to the event loop
# (the other sessions, the writer task, stdin).
TIME_SLICE: Final = 1e-3
# At most this many events taken at once from a stream that has them ready.
READY_MAX: Final = 64
# Longest stretch of stream handling between two looks at stdin: a Stop is
# handled within this much of streaming after it arrives (a look costs about
# a microsecond; the loop itself reads stdin only between slices).  At full
# rate that is a look every few chunks: about 4% of the loop's CPU, for a
# Stop read 25 us sooner on average than with a look every 0.1 ms (measured
# with `python -m bench.run --tests cancel_latency,throughput`).
POLL_SLICE: Final = 25e-6


class StepStream:
    """The open model stream of the current step."""

    __slots__ = ("asm", "attempt", "chunk_prefixes", "message_id")

    def __init__(self) -> None:
        # Two random ids of 16 hex digits from one read of the OS's random
        # source (a uuid4 each cost a read and an object).
        ids = os.urandom(16).hex()
        self.attempt = "att_" + ids[:16]
        # One id for the model response: its reasoning and its text are one
        # assistant message to the editor, as they are in the history.
        self.message_id = "msg_" + ids[16:]
        self.asm = StreamAssembler()
        # How this stream's text and reasoning frames start (see
        # `acp_bridge.loop.ending.retract_queued`).
        self.chunk_prefixes: tuple[bytes, ...] = ()


class IdleWatch:
    """Ends a stream that sends no event for ``limit`` seconds, through the
    deadline of ``scope`` (the turn's): the deadline is moved forward as
    events come, at most a few times per limit, so it costs nothing per
    chunk, and it fires between ``limit`` and 1.25 ``limit`` after the last
    event.  Waiting for the editor to read is not silence (`pause`), and
    neither is a provider's announced wait before a retry (`grace`).

    When it was last moved is kept on the monotonic clock, which `saw` reads
    at every slice of the stream: a C call, where the event loop's time
    through anyio is a few Python calls; the deadline itself is on the
    loop's clock."""

    def __init__(self, limit: float | None, scope: anyio.CancelScope) -> None:
        self.limit = limit
        self.seen = 0
        self.fired = False
        self._scope = scope
        self._set_at = -math.inf

    def start(self) -> None:
        """Start watching (the scope must be entered); `stop` ends it."""
        self._move(0.0)

    def saw(self, seen: int) -> None:
        """``seen`` events so far: the deadline moves if some came since it was set."""
        if seen != self.seen:
            self.seen = seen
            if self.limit is not None and time.monotonic() - self._set_at > self.limit / 4:
                self._move(0.0)

    def grace(self, delay: float) -> None:
        """The provider waits ``delay`` seconds before a retry: allowed, once."""
        self._move(delay)
        self._set_at = -math.inf  # the next event moves it back

    def pause(self) -> None:
        if self.limit is not None:
            self._scope.deadline = math.inf

    def resume(self) -> None:
        self._move(0.0)

    def stop(self) -> None:
        """Stop watching; ``fired`` says whether the deadline ended the stream."""
        if self.limit is None:
            return
        scope = self._scope
        if scope.cancel_called and anyio.current_time() >= scope.deadline:
            self.fired = True
        scope.deadline = math.inf

    def _move(self, extra: float) -> None:
        if self.limit is not None:
            self._set_at = time.monotonic()
            self._scope.deadline = anyio.current_time() + self.limit * 1.25 + extra


class StreamingTurn(UsageTurn, Protocol):
    """What the hot loop uses of its turn."""

    # The live provider stream while the loop iterates it (a Stop aborts it).
    events: ProviderStream | None

    @property
    def over(self) -> bool: ...

    def show_tool(self, update: dict[str, Any]) -> None: ...


async def consume(
    turn: StreamingTurn, request: ModelRequest, stream: StepStream, idle: IdleWatch
) -> None:
    """The hot loop: each event is fed, sent to the editor and logged, in that order."""
    session = turn.session
    outbox = session.outbox
    frames = session.frames  # the connection's dialect: the chunks' bytes
    text_prefix = frames.chunk_prefix("agent_message_chunk", stream.message_id)
    thought_prefix = frames.chunk_prefix("agent_thought_chunk", stream.message_id)
    suffix = frames.chunk_suffix
    prefixes: dict[type, tuple[bytes, str]] = {
        TextDelta: (text_prefix, "text"),
        ReasoningDelta: (thought_prefix, "reasoning"),
    }
    stream.chunk_prefixes = (text_prefix, thought_prefix)
    outbox.merge_chunks(stream.chunk_prefixes, suffix)
    feed, send, delta = stream.asm.feed, outbox.send, turn.rec.delta
    poll_input, write_batch = outbox.poll_input, outbox.write_batch
    high_water, batch_bytes = outbox.high_water, outbox.batch_bytes
    dumps = orjson.dumps
    join = b"".join
    clock = time.perf_counter
    poll_at = clock() + POLL_SLICE
    yield_at = poll_at + TIME_SLICE
    # Events seen (for the idle watch, told once per slice) and frame bytes
    # queued since the writer last took the queue, as far as this loop knows.
    seen = 0
    saw = idle.saw
    queued = outbox.backlog
    async with session.provider.stream(request) as events:
        turn.events = events
        # The events a stream has ready, in one call (`ProviderStream.take_ready`).
        take_ready = events.take_ready
        while True:
            ready: Sequence[Any] = take_ready(READY_MAX)
            if not ready:
                try:
                    ready = (await events.__anext__(),)
                except StopAsyncIteration:
                    break
            for ev in ready:
                seen += 1
                if clock() > poll_at:
                    saw(seen)
                    # A Stop waiting on stdin is handled now (it ends this turn
                    # synchronously), not after this task's slice.
                    poll_input()
                    if not turn.over and clock() > yield_at:
                        # Fairness: a provider that hands out many events
                        # without waiting would otherwise keep the loop from
                        # running the writer and the other sessions.
                        await anyio.lowlevel.checkpoint()
                        yield_at = clock() + TIME_SLICE
                        queued = outbox.backlog
                        high_water, batch_bytes = outbox.high_water, outbox.batch_bytes
                    poll_at = clock() + POLL_SLICE
                if turn.over:
                    # A stop was read while the provider yielded: leave now
                    # rather than wait for the cancellation to be delivered.
                    return
                kind = type(ev)
                chunk = prefixes.get(kind)
                if chunk is not None:
                    feed(ev)
                    prefix, block_kind = chunk
                    text_ev: TextDelta = ev  # type: ignore[assignment]  # or ReasoningDelta: same fields
                    frame = join((prefix, dumps(text_ev.text), suffix))
                    send(frame)
                    delta(text_ev.index, block_kind, text_ev.text)
                    queued += len(frame)
                    if queued > batch_bytes:
                        saw(seen)
                        await _hand_over(outbox, idle, write_batch, high_water)
                        if turn.over:
                            return
                        yield_at = clock() + TIME_SLICE
                        queued = outbox.backlog
                        high_water, batch_bytes = outbox.high_water, outbox.batch_bytes
                else:
                    saw(seen)
                    _other_event(turn, ev, feed, idle)
        saw(seen)
        # The stream is complete: from here a stop no longer aborts it.
        turn.events = None
    if stream.asm.finish is None:
        stream.asm.end_stream()


async def _hand_over(
    outbox: TurnOutput,
    idle: IdleWatch,
    write_batch: Callable[[], bool],
    high_water: int,
) -> None:
    """A batch of frames waits: written now by this task while the editor
    reads fast and keeps up (`TurnOutput.write_batch`), else taken by the
    writer task at this yield, or, over the high-water mark, once the editor
    has read enough."""
    if write_batch():
        return
    if outbox.backlog <= high_water:
        await anyio.lowlevel.checkpoint()
        return
    # Waiting for the editor to read is not provider silence.
    idle.pause()
    try:
        await outbox.wait_writable()
    finally:
        idle.resume()


def _other_event(
    turn: StreamingTurn, ev: Any, feed: Callable[[Any], None], idle: IdleWatch
) -> None:
    """An event other than a text or reasoning delta (rare: off the hot path)."""
    kind = type(ev)
    if kind is Retrying:
        _retrying(turn, ev)
        # The provider now waits before its retry: that wait is not a silent
        # stream.
        idle.grace(ev.delay)
        return
    feed(ev)
    if kind is ToolCallStart:
        _announce_tool(turn, ev)
    elif kind is ToolCallDelta:
        turn.rec.delta(ev.index, "tool_args", ev.args)
    elif kind is Usage:
        report_usage(turn, ev)


def _retrying(turn: StreamingTurn, ev: Retrying) -> None:
    """The provider retries a failed request itself: log it, tell the user."""
    fields = turn.rec.request_error(ev.error, retry=(ev.attempt, ev.delay))
    if not turn.rec.closed:
        from ..notices import notify

        text = retry_notice(fields)["content"]["text"]
        notify(turn.session, "warning", "Retrying the model request", text)


def _announce_tool(turn: StreamingTurn, ev: ToolCallStart) -> None:
    tool = turn.session.tools.registry.get(ev.name)
    turn.show_tool(
        tool_call(
            {
                "toolCallId": ev.id,
                "title": ev.name,
                "kind": "other" if tool is None else tool.kind,
                "status": "pending",
            }
        )
    )
