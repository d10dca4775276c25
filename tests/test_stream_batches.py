"""How a streaming turn hands its chunk frames to the ordered writer.

At full rate (a provider that hands out events without waiting) the hot loop
(`acp_bridge.loop.stream.consume`) lets the writer take a batch once
`BATCH_BYTES` of frames wait for it: batches are big enough that the writer's
fixed cost per batch is small per chunk, and small enough that they reach the
editor as queued (unmerged, `acp_bridge.transport.merge.MERGE_ABOVE`).  The
outbox wakes its writer once per batch, not once per chunk, and a frame sent
after the writer went idle still wakes it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from acp_bridge.loop.stream import IdleWatch, StepStream, consume
from acp_bridge.protocol.frames import CHUNK_SUFFIX, UpdateFrames
from acp_bridge.providers import base
from acp_bridge.providers.base import ProviderStream, TextDelta
from acp_bridge.transport.merge import MERGE_ABOVE
from acp_bridge.transport.outbox import BATCH_BYTES, HIGH_WATER, Outbox

pytestmark = pytest.mark.anyio

CHUNKS = 2000


class Events(ProviderStream):
    """A provider stream of ``count`` text deltas, none of which waits."""

    def __init__(self, count: int) -> None:
        self.left = count

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> TextDelta:
        if not self.left:
            raise StopAsyncIteration
        self.left -= 1
        return TextDelta(0, "tok ")

    def abort(self) -> bool:
        return False


class Provider(base.Provider):
    @asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[Events]:
        yield Events(CHUNKS)


class BatchingOutbox:
    """The writer side of `consume`, run by the test: it records the bytes
    queued each time it gets to run (what a batch of the real writer holds)."""

    high_water = HIGH_WATER
    batch_bytes = BATCH_BYTES

    def __init__(self) -> None:
        self.queued: list[bytes] = []
        self.batches: list[int] = []
        self.wake = anyio.Event()
        self.poll_input: Callable[[], None] = lambda: None

    @property
    def backlog(self) -> int:
        return sum(map(len, self.queued))

    def send(self, frame: bytes) -> None:
        self.queued.append(frame)
        self.wake.set()

    def merge_chunks(self, prefixes: tuple[bytes, ...], suffix: bytes) -> None:
        pass

    def write_batch(self) -> bool:
        return False  # an editor not known to read fast: the writer takes the batch

    async def wait_writable(self) -> None:
        while self.backlog > self.high_water:  # the writer task takes it
            await anyio.lowlevel.checkpoint()

    def take(self) -> None:
        if self.queued:
            self.batches.append(self.backlog)
            self.queued.clear()


@dataclass
class Recorder:
    parts: list[str] = field(default_factory=list)

    def delta(self, index: int, kind: str, text: str) -> None:
        self.parts.append(text)


@dataclass
class Session:
    outbox: BatchingOutbox
    provider: Provider = field(default_factory=Provider)
    frames: UpdateFrames = field(default_factory=lambda: UpdateFrames("sess_1"))


@dataclass
class Turn:
    session: Session
    rec: Recorder = field(default_factory=Recorder)
    events: Any = None
    over: bool = False


async def test_at_full_rate_the_writer_gets_batches_that_it_sends_as_queued() -> None:
    outbox = BatchingOutbox()
    turn = Turn(Session(outbox))
    done = anyio.Event()

    async def writer() -> None:
        while not done.is_set():
            await outbox.wake.wait()
            outbox.wake = anyio.Event()
            outbox.take()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        with anyio.fail_after(30):
            stream = StepStream()
            await consume(turn, None, stream, IdleWatch(None, tg.cancel_scope))  # type: ignore[arg-type]
        done.set()
        outbox.wake.set()
    outbox.take()
    frame = len(outbox_frame(turn, stream))
    assert len(turn.rec.parts) == CHUNKS
    assert sum(outbox.batches) == CHUNKS * frame
    # No batch is over what the writer sends as queued; all together they
    # are far fewer than the chunks.
    assert max(outbox.batches) <= MERGE_ABOVE
    assert len(outbox.batches) < CHUNKS // 4


def outbox_frame(turn: Turn, stream: StepStream) -> bytes:
    prefix = turn.session.frames.chunk_prefix("agent_message_chunk", stream.message_id)
    return prefix + b'"tok "' + CHUNK_SUFFIX


async def test_a_frame_sent_after_the_writer_went_idle_wakes_it() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            got = b""
            for n in range(3):
                for _ in range(5):
                    outbox.send(b"frame %d\n" % n)
                with anyio.fail_after(10):
                    await outbox.drain()
                got += os.read(read_end, 1 << 16)
            outbox.close()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert got == b"".join(b"frame %d\n" % n * 5 for n in range(3))
