"""A log's fsync is asked for after what was queued before it, never ahead of it.

A prompt's answer asks for an fsync of its log once its records are written.
With nothing queued the sync is asked for at once (no pass of the writer for
it); with records still queued it waits behind them, so the sync covers them.
A real pipe for stdout and a log target that notes what happens to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
from support.harness import read_available
from test_flush_now import frame_bigger_than_the_pipe, until_the_writer_took_it

from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio


class NotedLog:
    """A `LogTarget` that notes its writes and syncs, in order."""

    def __init__(self) -> None:
        self.path = "noted.jsonl"
        self.pending = bytearray()
        self.error: str | None = None
        self.synced_at = float("-inf")
        self.events: list[str] = []
        self.synced = anyio.Event()

    def write(self, data: bytes) -> None:
        self.events.append(f"write {data!r}")

    def verify(self) -> None:
        pass

    def fsync(self) -> None:
        self.events.append("fsync")

    def begin_sync(self) -> Callable[[], None]:
        self.events.append("sync")
        return self._nothing

    def end_sync(self) -> None:
        self.synced.set()

    def close(self) -> None:
        pass

    def _nothing(self) -> None:
        pass


async def test_a_sync_with_nothing_queued_is_asked_for_at_once() -> None:
    read_end, write_end = os.pipe()
    outbox = Outbox(write_end)
    log = NotedLog()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        outbox.send(b"{}\n")
        await outbox.drain()  # the writer runs, and the queue is empty
        outbox.fsync_log(log)
        queued = list(outbox._queue)
        with anyio.fail_after(10):  # a hang guard, not a speed limit
            await log.synced.wait()
        outbox.close()
    assert queued == [], "the sync waited for a pass of the writer"
    assert log.events == ["sync"]
    os.close(write_end)
    os.close(read_end)


async def test_a_sync_waits_behind_the_records_queued_before_it() -> None:
    """While the writer waits for a full stdout, a record queued waits for the
    next batch: the sync asked for after it comes after it too."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    log = NotedLog()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        frame, _ = await frame_bigger_than_the_pipe(write_end)
        outbox.send(frame)
        await until_the_writer_took_it(outbox)  # it now waits for stdout
        outbox.write_log(log, b"record\n")
        outbox.fsync_log(log)
        with anyio.fail_after(10):  # a hang guard, not a speed limit
            got = b""
            while len(got) < len(frame):
                got += read_available(read_end)
                await anyio.lowlevel.checkpoint()
            await log.synced.wait()
        outbox.close()
    assert log.events == ["write b'record\\n'", "sync"]
    os.close(write_end)
    os.close(read_end)
