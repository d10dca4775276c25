"""Where new sessions get their provider: the factory start-up makes, and its reloads.

Start-up loads the provider's configuration in a worker thread while
``initialize`` is answered (`acp_bridge.server`); until then a new session
waits for it.  While no provider can start (`needs_auth`), each new session
loads the configuration again first, so a setup run meanwhile takes effect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ..errors import AuthNeeded
from ..providers.base import Provider

__all__ = ["ProviderSlot"]


class ProviderSlot:
    def __init__(self) -> None:
        self._factory: Callable[[], Provider] | None = None
        self._ready = anyio.Event()
        # Loads the configuration again and calls `set_factory` or `needs_auth`
        # (set by the server; None: the factory is whatever was set once).
        self.reload: Callable[[], Awaitable[object]] | None = None
        # Why no provider can start, while none can.
        self.missing: str | None = None
        self._lock = anyio.Lock()

    def set_factory(self, factory: Callable[[], Provider]) -> None:
        self._factory = factory
        self._ready.set()

    def needs_auth(self, reason: str) -> None:
        """No provider can start until the user sets one up (``reason`` says how):
        every new session is refused with `AuthNeeded`."""
        self.missing = reason

        def refuse() -> Provider:
            raise AuthNeeded(reason)

        self.set_factory(refuse)

    async def reload_now(self) -> None:
        """Load the provider's configuration again (no-op without ``reload``)."""
        if self.reload is None:
            return
        async with self._lock:
            self.missing = None
            await self.reload()

    async def reload_when_ready(self) -> None:
        """Load the provider again once start-up has made the first factory."""
        await self._ready.wait()
        await self.reload_now()

    async def check(self) -> None:
        """Load the provider again, then raise the error a new session would get
        now, if any: the factory makes a provider, which sends no request."""
        await self.reload_when_ready()
        assert self._factory is not None
        self._factory()

    async def new(self) -> Provider:
        """A provider for a new or reopened session, once start-up has made the factory."""
        await self._ready.wait()
        if self.missing is not None:
            await self.reload_now()  # set up meanwhile?
        assert self._factory is not None
        return self._factory()
