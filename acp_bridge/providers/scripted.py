"""The keyless provider: replays a `Script` through the provider seam.

Each `ScriptedProvider.stream` call takes the next scripted response and turns
it into a flat list of operations: ready-made stream events, and a few control
operations (sleep, hang, endless, fail) that the iterator performs when it
reaches them.  ``report`` events are resolved against the request at that
moment, so a script can answer with what the model was actually sent.

The iterator is a plain object with ``__anext__`` (not an async generator), so
nothing is suspended across the caller's cancel scopes, and leaving the
``stream()`` context manager simply discards it.  It reaches an anyio
checkpoint at every pause and after every 128 events, so a cancel lands
within a fraction of a millisecond even when nothing sleeps.

Why this module is a little over 400 lines: the provider and its one stream
class, whose event pacing, reports and compaction answers share the stream's
state; the script's format is apart (`acp_bridge.providers.script_format`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import anyio
import anyio.lowlevel
import anyio.to_thread

from acp_bridge.context.config import ContextConfig
from acp_bridge.context.windows import ModelInfo, resolve_window
from acp_bridge.providers.base import (
    BlockEnd,
    Finish,
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from acp_bridge.providers.script_check import PreparedScript, ScriptError
from acp_bridge.providers.vendors import FAKE

if TYPE_CHECKING:  # the models load with the first request (pydantic: not at start-up)
    from acp_bridge.providers.script_format import Script, ScriptResponse

__all__ = ["ScriptedProvider", "report_lines"]

# Without pauses, reach a checkpoint after this many events (a power of two).
# An anyio checkpoint costs several microseconds on asyncio (and lets the
# writer take a batch), so checkpointing on every event cuts the endless
# stream's rate by about ten times; every 128th keeps a cancel within about
# half a millisecond of streaming (the turn's own loop also yields, and reads
# a Stop from stdin, far more often: `acp_bridge.loop.stream`).
CHECKPOINT_EVERY: Final = 128
_CHECKPOINT_MASK: Final = CHECKPOINT_EVERY - 1

EXHAUSTED: Final = ProviderError("script exhausted", kind="scripted")


class ScriptedProvider:
    """A model backend that replays a script; ``name`` is ``"fake"``.

    Every `stream` call consumes one response, in order; ``request_count``
    counts them.  Requests are not kept: each carries the whole history.
    A `PreparedScript` has its models built at its first request (once for
    every session); should they refuse it, every request fails with their
    message.
    """

    name: str = FAKE
    # What it can do (`Provider`): no model names, nor a choice; images; no key.
    model = ""
    models: tuple[str, ...] = ()
    images = True
    key_env = None

    def __init__(
        self, script: Script | PreparedScript, context: ContextConfig | None = None
    ) -> None:
        self._script = script
        self.request_count = 0
        self._cursor = 0
        self.context = context or ContextConfig()

    async def model_info(self) -> ModelInfo:
        """The window of ``--context-window`` (or the default; a script's usage
        events may report one).  No output reserve, no usage estimates."""
        window, source = resolve_window(None, self.context)
        price = self.context.prices.get(self.name)
        return ModelInfo(window, source, 0, price, estimate_usage=False)

    @property
    def script(self) -> Script:
        """The script's models (built now if they are not yet); raises `ScriptError`."""
        script = self._script
        if isinstance(script, PreparedScript):
            script = self._script = script.get()
        return script

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[_ScriptStream]:
        self.request_count += 1
        # The response a request takes is decided now, whether or not its stream
        # is ever opened (a Stop may come first); a summary request takes none.
        cursor = None
        if request.metadata.get("purpose") != "compaction":
            cursor = self._cursor
            self._cursor += 1
        if isinstance(self._script, PreparedScript):
            return self._built_then_open(self._script, request, cursor)
        return _ScriptStream(self._ops(request, cursor))

    @asynccontextmanager
    async def _built_then_open(
        self, prepared: PreparedScript, request: ModelRequest, cursor: int | None
    ) -> AsyncGenerator[_ScriptStream, None]:
        """A stream of a script whose models may not be built yet: they are built
        in a worker thread (or, if another stream is building them, waited for there),
        cancellable, and not on the event loop, which a pydantic build would hold."""
        await anyio.to_thread.run_sync(_build, prepared, abandon_on_cancel=True)
        async with _ScriptStream(self._ops(request, cursor)) as stream:
            yield stream

    def _ops(self, request: ModelRequest, cursor: int | None) -> list[_Op]:
        try:
            script = self.script
        except ScriptError as exc:
            return [_Fail(ProviderError(str(exc), kind="scripted"))]
        if cursor is None:
            # A summary request takes no response from the list.
            compaction = script.compaction
            if compaction is None:
                return [TextDelta(0, default_summary(request)), BlockEnd(0), Finish("end_turn")]
            response = compaction
        else:
            place = _place_of(script, cursor)
            if place is None:
                return [_Fail(EXHAUSTED)]
            response = script.responses[place]
        return _compile(response, request, script.chunk_delay_ms)


def _place_of(script: Script, cursor: int) -> int | None:
    """The place in the script of the response of the request at ``cursor``
    (from 0); None once exhausted."""
    count = len(script.responses)
    if cursor < count:
        return cursor
    mode = script.when_exhausted
    if mode == "repeat_last":
        return count - 1
    if mode == "repeat_all":
        return cursor % count
    return None


def _build(prepared: PreparedScript) -> None:
    """In a worker thread: the script's models (built once; the stream reports an error)."""
    with suppress(ScriptError):
        prepared.get()


# -- control operations ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class _Hang:
    seconds: float | None
    shield: bool


@dataclass(frozen=True, slots=True)
class _Endless:
    event: TextDelta
    seconds: float


@dataclass(frozen=True, slots=True)
class _Fail:
    error: ProviderError


_Op: TypeAlias = StreamEvent | _Sleep | _Hang | _Endless | _Fail
_CONTROL: Final = frozenset({_Sleep, _Hang, _Endless, _Fail})


class _ScriptStream:
    """The async iterator of one scripted response, and its own context manager
    (leaving it closes the stream)."""

    __slots__ = ("_count", "_endless", "_endless_seconds", "_ops", "_pos", "_wedged")

    def __init__(self, ops: list[_Op]) -> None:
        self._ops = ops
        self._pos = 0
        self._count = 0
        self._endless: TextDelta | None = None
        self._endless_seconds = 0.0
        self._wedged = False

    async def __aenter__(self) -> _ScriptStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __aiter__(self) -> _ScriptStream:
        return self

    async def __anext__(self) -> StreamEvent:
        endless = self._endless
        if endless is not None:
            if self._endless_seconds:
                await anyio.sleep(self._endless_seconds)
            else:
                count = self._count = self._count + 1
                if not count & _CHECKPOINT_MASK:
                    await anyio.lowlevel.checkpoint()
            return endless
        ops = self._ops
        while self._pos < len(ops):
            op = ops[self._pos]
            self._pos += 1
            if type(op) not in _CONTROL:
                count = self._count = self._count + 1
                if not count & _CHECKPOINT_MASK:
                    await anyio.lowlevel.checkpoint()
                return op  # type: ignore[return-value]
            await self._control(op)
            if self._endless is not None:
                return await self.__anext__()
        raise StopAsyncIteration

    def take_ready(self, limit: int) -> list[StreamEvent]:
        """See `ProviderStream.take_ready`: [] before a pause, a hang, a failure, the end."""
        endless = self._endless
        if endless is not None:
            return [] if self._endless_seconds else [endless] * limit
        ops, start = self._ops, self._pos
        end, last = start, min(len(ops), start + limit)
        while end < last and type(ops[end]) not in _CONTROL:
            end += 1
        self._pos = end
        return ops[start:end]  # type: ignore[return-value]  # stream events only

    async def _control(self, op: _Op) -> None:
        if isinstance(op, _Sleep):
            await anyio.sleep(op.seconds)
        elif isinstance(op, _Hang):
            if op.shield:
                self._wedged = True
                try:
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(op.seconds or 0)
                finally:
                    self._wedged = False
                # A cancel that arrived meanwhile is delivered here.
                await anyio.lowlevel.checkpoint()
            elif op.seconds is None:
                await anyio.sleep_forever()
            else:
                await anyio.sleep(op.seconds)
        elif isinstance(op, _Endless):
            self._endless = op.event
            self._endless_seconds = op.seconds
        elif isinstance(op, _Fail):
            self.close()
            error = op.error
            raise ProviderError(
                error.message,
                kind=error.kind,
                retryable=error.retryable,
                status=error.status,
                request_id=error.request_id,
            )

    def close(self) -> None:
        self._pos = len(self._ops)
        self._endless = None

    def abort(self) -> bool:
        """Stop the stream now (see `Provider`); a wedged hang cannot be stopped."""
        if self._wedged:
            return False
        self.close()
        return True


# -- compiling a response --------------------------------------------------------


class _Compiler:
    """Turns the steps of a response into operations, assigning block indices."""

    def __init__(self, default_delay_ms: float) -> None:
        self.ops: list[_Op] = []
        self.default_delay_ms = default_delay_ms
        self.index = -1
        self.kind: str | None = None  # kind of the open block, if any
        self.first_chunk = True

    def open_block(self, kind: str, *, new: bool = False) -> int:
        if new or kind != self.kind:
            self.end_block()
            self.index += 1
            self.kind = kind
        return self.index

    def end_block(self) -> None:
        if self.kind is not None:
            self.ops.append(BlockEnd(self.index))
            self.kind = None

    def chunk(self, event: StreamEvent, delay_ms: float | None) -> None:
        delay = self.default_delay_ms if delay_ms is None else delay_ms
        if delay and not self.first_chunk:
            self.ops.append(_Sleep(delay / 1000))
        self.first_chunk = False
        self.ops.append(event)

    def text(self, kind: str, pieces: Sequence[str], delay_ms: float | None) -> None:
        index = self.open_block(kind)
        make = TextDelta if kind == "text" else ReasoningDelta
        for piece in pieces:
            self.chunk(make(index, piece), delay_ms)


def _compile(response: ScriptResponse, request: ModelRequest, default_delay_ms: float) -> list[_Op]:
    from acp_bridge.providers.script_format import (
        DelayEvent,
        EndlessEvent,
        HangEvent,
        ReasoningEvent,
        ReportEvent,
        StallEvent,
        TextEvent,
        ToolArgsEvent,
        ToolCallEvent,
        ToolCallStartEvent,
        UsageEvent,
    )

    c = _Compiler(default_delay_ms)
    for event in response.events:
        if isinstance(event, TextEvent):
            c.text("text", _chunks(event.text, event.chunk_size), event.chunk_delay_ms)
        elif isinstance(event, ReasoningEvent):
            c.text("reasoning", _chunks(event.reasoning, event.chunk_size), event.chunk_delay_ms)
        elif isinstance(event, ReportEvent):
            lines = report_lines(request, event.report)
            c.text("text", [line + "\n" for line in lines[:-1]] + lines[-1:], None)
        elif isinstance(event, ToolCallEvent):
            call = event.tool_call
            index = c.open_block("tool", new=True)
            c.ops.append(ToolCallStart(index, call.id, call.name))
            for piece in _split(call.arguments_text(), call.chunks):
                c.chunk(ToolCallDelta(index, piece), call.chunk_delay_ms)
            c.end_block()
        elif isinstance(event, ToolCallStartEvent):
            index = c.open_block("tool", new=True)
            start = event.tool_call_start
            c.ops.append(ToolCallStart(index, start.id, start.name))
        elif isinstance(event, ToolArgsEvent):
            c.chunk(ToolCallDelta(c.index, event.tool_args), None)
        elif isinstance(event, UsageEvent):
            u = event.usage
            c.ops.append(Usage(u.input_tokens, u.output_tokens, u.context_window))
        elif isinstance(event, DelayEvent | StallEvent):
            c.ops.append(_Sleep(event.pause_ms / 1000))
        elif isinstance(event, HangEvent):
            c.ops.append(_Hang(event.seconds, event.ignore_cancel))
        elif isinstance(event, EndlessEvent):
            endless = event.endless
            delay_ms = default_delay_ms if endless.delay_ms is None else endless.delay_ms
            index = c.open_block("text")
            delta = TextDelta(index, endless.text)
            if c.first_chunk:  # no pause before the first chunk of a response
                c.chunk(delta, 0)
            c.ops.append(_Endless(delta, delay_ms / 1000))
            return c.ops
        else:  # ErrorEvent
            e = event.error
            error = ProviderError(
                e.message,
                kind=e.kind,
                retryable=e.retryable,
                status=e.status,
                request_id=e.request_id,
            )
            c.ops.append(_Fail(error))
            return c.ops
    c.end_block()
    c.ops.append(Finish(response.finish_reason))
    return c.ops


def _chunks(text: str, size: int | None) -> list[str]:
    if not size or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def _split(text: str, parts: int) -> list[str]:
    """``text`` in ``parts`` near-equal non-empty pieces (fewer if it is shorter)."""
    q, r = divmod(len(text), parts)
    out: list[str] = []
    start = 0
    for i in range(parts):
        end = start + q + (1 if i < r else 0)
        if end > start:
            out.append(text[start:end])
        start = end
    return out


# -- report ----------------------------------------------------------------------


def default_summary(request: ModelRequest) -> str:
    """The scripted answer to a summary request: the user's texts it was sent, in order
    (the last user message, which holds the instruction, is left out)."""
    said = [
        text
        for m in request.messages[:-1]
        if m.get("role") == "user" and (text := _joined(m, "text")) is not None
    ]
    return (
        "Summary of the conversation: the user said "
        + " / ".join(json.dumps(" ".join(text.split())[:200], ensure_ascii=False) for text in said)
        + "."
    )


def parse_report(text: str) -> dict[str, Any]:
    """The facts of a ``report`` answer (the lines of `report_lines`), by name.

    Lines without ``": "`` are skipped; a value that is not JSON raises ValueError.
    """
    facts: dict[str, Any] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep:
            facts[name.strip()] = json.loads(value)
    return facts


def report_lines(request: ModelRequest, facts: Sequence[str]) -> list[str]:
    """``name: value`` lines describing ``request``; values are JSON.

    ``message_count``: number of messages.  ``last_user_text``: the text
    blocks, concatenated, of the last user message that has any (null if
    none).  ``last_assistant_text`` / ``last_assistant_reasoning``: the text /
    reasoning blocks, concatenated, of the last assistant message (null if
    there is none).  ``last_assistant_interrupted``: its ``interrupted`` flag
    (null if none).  ``tool_results``: the tool results in the last message,
    as ``[{"tool_call_id", "is_error", "text"}]``.  ``tool_names``: the tools
    the request offers.
    """
    messages = request.messages
    assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    values: dict[str, Any] = {"message_count": len(messages)}
    values["last_user_text"] = next(
        (
            text
            for m in reversed(messages)
            if m.get("role") == "user" and (text := _joined(m, "text")) is not None
        ),
        None,
    )
    values["last_assistant_text"] = _joined(assistant, "text", "") if assistant else None
    values["last_assistant_reasoning"] = _joined(assistant, "reasoning", "") if assistant else None
    values["last_assistant_interrupted"] = (
        bool(assistant.get("interrupted", False)) if assistant else None
    )
    first = messages[0] if messages else None
    values["first_user_text"] = _joined(first, "text") if first else None
    values["tool_names"] = [tool.name for tool in request.tools]
    values["tool_results"] = [
        {
            "tool_call_id": block.get("tool_call_id"),
            "is_error": bool(block.get("is_error", False)),
            "text": "".join(
                b.get("text", "") for b in block.get("content", ()) if b.get("type") == "text"
            ),
        }
        for block in (messages[-1].get("content", ()) if messages else ())
        if block.get("type") == "tool_result"
    ]
    return [f"{fact}: {json.dumps(values[fact], ensure_ascii=False)}" for fact in facts]


def _joined(message: dict[str, Any], kind: str, default: str | None = None) -> str | None:
    """The concatenated ``kind`` blocks of a message, or ``default`` if it has none."""
    texts = [b.get("text", "") for b in message.get("content", ()) if b.get("type") == kind]
    return "".join(texts) if texts else default
