"""`Outbox.write_batch`: a streaming turn writes its own batch while the editor reads fast.

Only while the in-flight bound has grown (the editor drains the pipe fast,
`acp_bridge.transport.pace`) and the pipe is under it; the batch's log
records are written before its frames, as the writer task writes them, and
its chunk frames are not merged.  Otherwise nothing is written: the writer
task takes the queue (merged, for a slow editor) once the editor has read
enough, and what is still queued can be taken back by a Stop.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest

from acp_bridge.protocol.frames import CHUNK_SUFFIX, UpdateFrames
from acp_bridge.transport.outbox import Outbox
from acp_bridge.transport.pace import BOUNDS, IN_FLIGHT

pytestmark = pytest.mark.anyio

TEXT = UpdateFrames("sess_1").chunk_prefix("agent_message_chunk", "msg_1")


def chunk(text: str) -> bytes:
    return TEXT + orjson.dumps(text) + CHUNK_SUFFIX


class Log:
    """A log file that records what reached it, and when (after which stdout bytes)."""

    def __init__(self, stdout: int) -> None:
        self.path = "log"
        self.pending = bytearray()
        self.error: str | None = None
        self.synced_at = 0.0
        self.stdout = stdout
        self.writes: list[tuple[bytes, int]] = []

    def write(self, data: bytes) -> None:
        self.writes.append((data, unread(self.stdout)))


def unread(fd: int) -> int:
    import fcntl
    import termios
    from array import array

    count = array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


@contextmanager
def outbox_on_a_pipe(bound: int) -> Iterator[tuple[Outbox, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    outbox._pipe.prepare()  # the small pipe, as the writer task makes it
    # The bound the editor's pace has earned (`ReaderPace` sets it per window).
    outbox._pipe._pace.bound = bound
    outbox.merge_chunks((TEXT,), CHUNK_SUFFIX)
    try:
        yield outbox, read_end
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_while_the_editor_reads_fast_the_batch_is_written_at_once_records_first() -> None:
    frames = [chunk("tok ") for _ in range(100)]  # over the merge threshold
    with outbox_on_a_pipe(BOUNDS[2]) as (outbox, read_end):
        log = Log(read_end)
        outbox.add_pre_flush(lambda: outbox.write_log(log, b'{"delta":1}\n'))  # type: ignore[arg-type]
        for frame in frames:
            outbox.send(frame)
        assert outbox.batch_bytes > IN_FLIGHT
        assert outbox.write_batch()
        assert outbox.backlog == 0
        data = os.read(read_end, 1 << 20)
    # Every chunk in its own frame, in order; the record went out before any.
    assert data == b"".join(frames)
    assert log.writes == [(b'{"delta":1}\n', 0)]


async def test_for_an_editor_not_known_to_read_fast_nothing_is_written() -> None:
    with outbox_on_a_pipe(IN_FLIGHT) as (outbox, read_end):
        for _ in range(100):
            outbox.send(chunk("tok "))
        queued = outbox.backlog
        assert not outbox.write_batch()
        assert outbox.backlog == queued  # still queued: a Stop can take it back
        assert unread(read_end) == 0


async def test_nothing_is_written_while_more_than_the_bound_is_unread() -> None:
    with outbox_on_a_pipe(BOUNDS[1]) as (outbox, read_end):
        outbox.send(b"x" * (BOUNDS[1] + 100) + b"\n")
        assert outbox.write_batch()
        before = unread(read_end)
        outbox.send(chunk("tok "))
        assert not outbox.write_batch()
        assert unread(read_end) == before
        assert outbox.backlog == len(chunk("tok "))
