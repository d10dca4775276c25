"""The provider of a session answered before its provider could be made.

The start-up's front door (`acp_bridge.front_door`) answers the first
``session/new`` from the provider's configuration, before the server makes
the provider itself.  Should making it fail after that (an HTTP stack that
cannot be loaded, say), the session the editor already has keeps this
stand-in: it names itself and offers the models as the answer did, and each
of its model requests fails with the reason, a provider error the editor shows.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..context.config import ContextConfig
from .base import ModelRequest, ProviderError, StreamEvent

if TYPE_CHECKING:
    from .config import ProviderConfig

__all__ = ["Unavailable"]


@dataclass
class Unavailable:
    name: str
    reason: str
    # The configuration the session was answered with (its models), if any.
    config: ProviderConfig | None = None

    def __post_init__(self) -> None:
        config = self.config
        self.model: str | None = config.models[0] if config is not None else None
        self.context = (config.context if config is not None else None) or ContextConfig()

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[_Failed]:
        return _open(self.reason)


class _Failed:
    """A stream whose first event is the failure."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        raise ProviderError(self.reason, kind="unavailable")

    def abort(self) -> bool:
        return True


@asynccontextmanager
async def _open(reason: str) -> AsyncGenerator[_Failed, None]:
    yield _Failed(reason)
