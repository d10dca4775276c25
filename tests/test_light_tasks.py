"""The plain asyncio tasks of `LightTasks` belong to their task group.

The server runs its request handlers and its turns in them; these tests hold
them to what a task of the group would do: a failure fails the group, and the
group's block does not end before they have (cancelled once if still running).
A request handler of the connection runs in one, and is cancelled at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import orjson
import pytest

from acp_bridge.jsonrpc import Connection
from acp_bridge.jsonrpc.connection import current_reply
from acp_bridge.light_tasks import LightTasks

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


async def test_a_task_that_fails_fails_the_group() -> None:
    reached_end = False

    async def fails() -> None:
        await anyio.lowlevel.checkpoint()
        raise Boom("in a light task")

    async def serve() -> None:
        nonlocal reached_end
        async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
            tasks.spawn(fails)
            await anyio.sleep(30)  # cancelled by the failure
            reached_end = True

    with pytest.RaisesGroup(Boom, allow_unwrapped=True, flatten_subgroups=True):
        await serve()
    assert not reached_end


async def test_the_block_cancels_and_waits_for_its_tasks() -> None:
    events: list[str] = []

    async def runs() -> None:
        try:
            await anyio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            await asyncio.sleep(0)  # still cleaning up: the block waits
            events.append("cleaned up")
            raise

    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        tasks.spawn(runs)
        await anyio.wait_all_tasks_blocked()
        assert len(tasks) == 1
        tg.cancel_scope.cancel()
    assert events == ["cancelled", "cleaned up"]
    assert len(tasks) == 0


async def test_tasks_that_returned_leave_nothing_behind() -> None:
    done: list[int] = []

    async def quick(n: int) -> None:
        await anyio.lowlevel.checkpoint()
        done.append(n)

    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        for n in range(3):
            tasks.spawn(quick, n)
        await anyio.wait_all_tasks_blocked()
        assert len(tasks) == 0
    assert sorted(done) == [0, 1, 2]


class Wire:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes) -> None:
        self.frames.append(frame)

    def flush_now(self) -> None:
        pass


async def test_a_request_handler_runs_in_a_light_task_and_is_cancelled_at_the_end() -> None:
    wire = Wire()
    conn = Connection(wire)
    started = anyio.Event()
    outcome: list[str] = []

    async def hangs(params: dict[str, object]) -> None:
        started.set()
        try:
            await anyio.sleep(30)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    conn.requests["hang"] = hangs
    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        conn.bind(tg, tasks)
        conn.feed(b'{"jsonrpc":"2.0","id":1,"method":"hang","params":{}}\n')
        await started.wait()
        assert len(tasks) == 1
        tg.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    assert len(tasks) == 0


async def test_a_method_with_a_cancel_hook_runs_without_a_scope_and_answers() -> None:
    wire = Wire()
    conn = Connection(wire)
    hooked: list[object] = []

    async def answer(params: dict[str, object]) -> dict[str, str]:
        await anyio.sleep(0.01)
        return {"stopReason": "end_turn"}

    conn.requests["prompt"] = answer
    conn.cancel_hooks["prompt"] = lambda rid, params: hooked.append(rid)
    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        conn.bind(tg, tasks)
        conn.feed(b'{"jsonrpc":"2.0","id":7,"method":"prompt","params":{}}\n')
        conn.feed(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}\n')
        await conn.wait_idle()
    assert hooked == [7]
    assert [orjson.loads(f) for f in wire.frames] == [
        {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "end_turn"}}
    ]


async def test_a_shutdown_waits_for_answers_not_for_a_handler_stuck_after_its_answer() -> None:
    """A prompt's handler runs its turn; a turn abandoned by the watchdog has
    answered while its task is still stuck: `wait_answered` returns then."""
    wire = Wire()
    conn = Connection(wire)
    release = anyio.Event()

    async def answers_then_hangs(params: dict[str, object]) -> None:
        current_reply.get().result({"stopReason": "cancelled"})
        await release.wait()

    async def answers_later(params: dict[str, object]) -> dict[str, str]:
        await anyio.sleep(0.01)
        return {"later": "yes"}

    conn.requests["stuck"] = answers_then_hangs
    conn.requests["later"] = answers_later
    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        conn.bind(tg, tasks)
        conn.feed(b'{"jsonrpc":"2.0","id":1,"method":"stuck","params":{}}\n')
        conn.feed(b'{"jsonrpc":"2.0","id":2,"method":"later","params":{}}\n')
        with anyio.fail_after(10):
            await conn.wait_answered()
        assert [orjson.loads(f)["id"] for f in wire.frames] == [1, 2]
        await anyio.wait_all_tasks_blocked()  # the answered handler of ``later`` returns
        assert len(tasks) == 1, "the stuck handler is still running"
        release.set()
        await conn.wait_idle()


async def test_waiting_for_answers_does_not_take_the_idle_wait_s_event() -> None:
    """`wait_answered` and `wait_idle` at once: both return when the requests end."""
    wire = Wire()
    conn = Connection(wire)
    release = anyio.Event()
    waited: list[str] = []

    async def slow(params: dict[str, object]) -> dict[str, str]:
        await release.wait()
        return {"done": "yes"}

    async def wait(name: str, waiter: Callable[[], Awaitable[None]]) -> None:
        await waiter()
        waited.append(name)

    conn.requests["slow"] = slow
    async with anyio.create_task_group() as tg, LightTasks(tg) as tasks:
        conn.bind(tg, tasks)
        conn.feed(b'{"jsonrpc":"2.0","id":1,"method":"slow","params":{}}\n')
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(10):
            async with anyio.create_task_group() as waiters:
                waiters.start_soon(wait, "idle", conn.wait_idle)
                await anyio.wait_all_tasks_blocked()
                waiters.start_soon(wait, "answered", conn.wait_answered)
                await anyio.wait_all_tasks_blocked()
                release.set()
    assert sorted(waited) == ["answered", "idle"]
