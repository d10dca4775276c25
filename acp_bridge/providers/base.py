"""The provider seam: provider-neutral stream events and the Provider protocol.

Every provider (the keyless scripted one and the real HTTP ones) turns its wire
format into the small vocabulary below.  The stream assembler
(`acp_bridge.loop.assembler`) is the only consumer, so the agent loop never sees
a vendor format.

Blocks are keyed by ``index``: the position of the content block in the
provider's response (Anthropic's ``index``, OpenAI's choice/tool index mapped by
the provider).  A block is opened implicitly by its first delta (text,
reasoning) or explicitly by `ToolCallStart`, and closed by `BlockEnd` or by the
end of the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from ..redact import scrub

if TYPE_CHECKING:
    from ..context.config import ContextConfig
    from ..context.windows import ModelInfo

# The image types every provider takes (Anthropic's list; OpenAI's vision
# models take the same four): a prompt's image of another type is refused
# where it arrives, not by the provider at the next request.
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

# Why the model stopped, in provider-neutral terms.  The loop maps these onto
# ACP stop reasons (see acp_bridge.loop.stop).
FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call's JSON arguments, as streamed."""

    index: int
    args: str


@dataclass(frozen=True, slots=True)
class ReasoningSignature:
    """The provider's signature of a complete reasoning block (Anthropic).

    Not visible text: it is kept on the block so that the reasoning can be
    sent back verbatim; a block without one is never sent back.
    """

    index: int
    signature: str


@dataclass(frozen=True, slots=True)
class BlockEnd:
    index: int


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    # Size of the model's context window, when the provider knows it.
    context_window: int | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    reason: FinishReason


class ProviderError(Exception):
    """A failed model request.  Never enters model history (invariant I5).

    ``kind`` is a short machine word (``"http"``, ``"overloaded"``,
    ``"protocol"``, ``"scripted"`` ...); ``retryable`` says whether the same
    request may succeed if sent again.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "provider",
        retryable: bool = False,
        status: int | None = None,
        request_id: str | None = None,
    ) -> None:
        # Its text reaches the editor, the event log, stderr and recordings:
        # without the process's secrets, nor anything shaped like a key.
        message = scrub(message)
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.request_id = request_id

    def to_record(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "retryable": self.retryable,
            "status": self.status,
            "request_id": self.request_id,
        }


class StreamIdleTimeout(ProviderError):
    """No event arrived within the idle limit (recorded as ``timed_out``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no stream event for {seconds:g}s", kind="idle_timeout", retryable=True)
        self.seconds = seconds


@dataclass(frozen=True, slots=True)
class Retrying:
    """A failed attempt that the provider retries after ``delay`` seconds.

    Yielded only before the first other event of a stream, so a retry never
    follows output that reached the editor.  It is log material (an
    ``agent/request-error`` with ``retrying: true``), never fed to the
    assembler and never part of model history.  ``attempt`` counts from 1:
    the attempt that failed.
    """

    error: ProviderError
    attempt: int
    delay: float


StreamEvent = (
    TextDelta
    | ReasoningDelta
    | ReasoningSignature
    | ToolCallStart
    | ToolCallDelta
    | BlockEnd
    | Usage
    | Finish
    | Retrying
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What one model call receives.

    ``messages`` is the provider-neutral history as produced by
    `acp_bridge.log.derive.derive_messages` (see that module for the shape).
    """

    messages: Sequence[dict[str, Any]]
    tools: Sequence[ToolSpec] = ()
    system: str | None = None
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class ProviderStream(Protocol):
    """The events of one model request, as an async iterator, plus ``abort``.

    Errors are raised as `ProviderError` from iteration.  The iterator must
    reach a cancellation point often enough that a cancel is seen promptly.
    """

    def __aiter__(self) -> AsyncIterator[StreamEvent]: ...

    async def __anext__(self) -> StreamEvent: ...

    def abort(self) -> bool:
        """Stop the stream at once, synchronously, releasing its request.

        Return True when it is stopped (no further event will be produced),
        or False when it cannot be stopped synchronously; cancellation then
        does it, within the cancel deadline.  A user stop uses it to answer
        the editor without waiting for the turn's task to unwind: the request
        is already gone, so the answer is exact.  Returning False is always
        correct, only slower.
        """
        ...

    def take_ready(self, limit: int) -> Sequence[StreamEvent]:
        """Up to ``limit`` next events that need no wait, as `__anext__` would hand
        them out; none when the next must be awaited (always correct, only
        slower).  The hot loop asks this first: the scripted stream saves a
        coroutine per event, and streams half as fast again."""
        return ()


class Provider(Protocol):
    """A model backend, and what it can do.

    ``stream(request)`` returns an async context manager that yields a
    `ProviderStream`.  Leaving the context manager (normally, by error, or by
    cancellation) must release the underlying request.

    What it can do is declared here, never probed; a provider that declares
    itself a subclass (the tests' doubles) takes the defaults below.
    `model_info` says the window, the room kept for the output, the price and
    whether usage is estimated when a response reports none.
    """

    name: str  # ``fake`` or a vendor's (`acp_bridge.providers.vendors`)
    # The model requests go to now (the editor may set another of `models`); "": none named.
    model: str = ""

    @property
    def models(self) -> Sequence[str]:
        """The models the editor may choose among (the first is the default); none: no choice."""
        return ()

    @property
    def images(self) -> bool:
        """Whether a prompt may hold images (if not, one is refused where it arrives)."""
        return True

    @property
    def key_env(self) -> str | None:
        """The variable holding its API key, kept from the tools' commands."""
        return None

    @property
    def context(self) -> ContextConfig | None:
        """The system prompt's settings, the windows and prices (None: the defaults)."""
        return None

    async def model_info(self) -> ModelInfo:
        """What the turn needs to know of the current model (`acp_bridge.context.windows`)."""
        from ..context.config import ContextConfig
        from ..context.windows import ModelInfo, resolve_window

        context = self.context or ContextConfig()
        window, source = resolve_window(self.model or None, context)
        return ModelInfo(window, source, price=context.prices.get(self.model))

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[ProviderStream]: ...
