"""Plain asyncio tasks that belong to an anyio task group as its own tasks do.

Every request's handler (a ``session/prompt``'s runs its turn) used to be an
anyio task of the server's task group.  anyio (4.14 and later) gives each
spawned task a handle with its own cancel scope and event: about 14 µs more
than a plain asyncio task, a few percent of a one-line turn.  These tasks are
plain asyncio tasks, and the task group they are opened in still owns them::

    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        tasks.spawn(handler, request)

* a task that fails (anything but its cancellation) fails the task group, as
  a task of the group would: the group is cancelled, and its exception is
  raised where the block ends;
* the block does not end before every task has returned: when it ends (the
  server's last step cancels the group), the tasks still running are
  cancelled once and waited for, so none outlives the server.

What they do not get is a place under the task group's cancel scope: a
cancellation of the group reaches them once (``Task.cancel``) when the block
ends, not again at each of their awaits.  Their users keep their own cancel
scopes for what must be stopped (a request's, a turn's), and by the time the
server's block ends every turn has ended and every request is answered (the
shutdown waits for them): only a stuck task (a turn the watchdog abandoned)
can still be running then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ["LightTasks"]


class LightTasks:
    """Spawns plain asyncio tasks owned by ``tg`` (see the module's docstring)."""

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self._tasks: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Start ``fn(*args)`` in a new task (it first runs at the loop's next turn)."""
        task = asyncio.get_running_loop().create_task(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def __len__(self) -> int:
        return len(self._tasks)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self._failure is None:
            self._failure = exc
            self._tg.cancel_scope.cancel()

    async def __aenter__(self) -> LightTasks:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The block may end cancelled (the group's scope): the wait is shielded.
        with anyio.CancelScope(shield=True):
            while self._tasks:
                tasks = set(self._tasks)
                for task in tasks:
                    task.cancel()
                await asyncio.wait(tasks)
        failure, self._failure = self._failure, None
        # The group was cancelled for this failure: it is what the group raises.
        if failure is not None and (
            exc is None or isinstance(exc, anyio.get_cancelled_exc_class())
        ):
            raise failure
