"""What a turn has in flight outside the model stream, and must see finish on a Stop.

A tool that runs, or a request to the editor (``fs/*``, ``terminal/*``,
``session/request_permission``), is started under `InFlight.track`.  When the
turn is stopped, its task is cancelled like the rest of the turn; the work
that must finish (a tool producing its real, possibly partial, result; a
permission request answered as cancelled) does its cleanup, and the turn's
ending waits for it with `InFlight.settle`: shielded from the cancellation
that caused it, and bounded by the cancel deadline.  Whatever is still running
then is abandoned (the turn ends ``forced``).

    async with turn.in_flight.track("tool:" + call_id):
        try:
            output = await run_tool(call)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                record_partial_result(call)
            raise
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class InFlight:
    __slots__ = ("_done", "_scopes", "labels")

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        # Set whenever nothing is in flight; made by the first `track` (most
        # turns track nothing: a turn without tools never makes one).
        self._done: anyio.Event | None = None
        # What is in flight, for logs and tests: label -> how many.
        self.labels: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._scopes)

    @asynccontextmanager
    async def track(self, label: str) -> AsyncIterator[anyio.CancelScope]:
        """Count the body as in flight until it returns or raises.

        The body runs in a cancel scope of its own, cancelled by `cancel`; a
        body that must produce a result after that (a partial tool output)
        shields its cleanup.
        """
        done = self._done
        if not self._scopes or done is None:
            done = self._done = anyio.Event()
        self.labels[label] = self.labels.get(label, 0) + 1
        scope = anyio.CancelScope()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)
            left = self.labels[label] - 1
            if left:
                self.labels[label] = left
            else:
                del self.labels[label]
            if not self._scopes:
                done.set()

    def cancel(self) -> None:
        """Cancel everything in flight (a Stop)."""
        for scope in self._scopes:
            scope.cancel()

    async def settle(self, deadline: float) -> bool:
        """Wait, shielded, at most ``deadline`` seconds for everything in flight.

        Returns True when nothing is left in flight.
        """
        done = self._done
        if not self._scopes or done is None:
            return True
        with anyio.CancelScope(shield=True), anyio.move_on_after(deadline):
            await done.wait()
        return not self._scopes
