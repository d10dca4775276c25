"""Reading stdin from a busy task (`InputPoll`), on a real pipe.

A turn that streams at full rate calls the poll between slices of its work, so
a Stop is handled there and then instead of after the event loop's next turn.
What matters: the bytes are handed over synchronously, in order with the
loop's own reads, never while reading is paused, and EOF stays the loop's.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import pytest
from support.harness import wait_until

from acp_bridge.transport.stdio import InputPoll, read_fd

pytestmark = pytest.mark.anyio


class Gate:
    """Backpressure that pauses reading once ``paused`` is set."""

    def __init__(self) -> None:
        self.paused = False
        self.room = anyio.Event()

    def input_paused(self) -> bool:
        return self.paused

    async def wait_input_room(self) -> None:
        await self.room.wait()


@asynccontextmanager
async def serving(
    gate: Gate | None = None,
) -> AsyncIterator[tuple[int, list[bytes], InputPoll, Callable[[], bool]]]:
    r, w = os.pipe()
    got: list[bytes] = []
    poll = InputPoll()
    finished = anyio.Event()

    async def serve() -> None:
        try:
            await read_fd(r, got.append, gate, poll)
        finally:
            finished.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            with anyio.fail_after(5):
                await wait_until(lambda: poll.active)
            yield w, got, poll, finished.is_set
            tg.cancel_scope.cancel()
    finally:
        for fd in (r, w):
            with suppress(OSError):
                os.close(fd)


async def test_a_poll_hands_over_what_stdin_holds_without_the_loop() -> None:
    async with serving() as (w, got, poll, _):
        poll()  # nothing there: nothing happens
        assert got == []
        os.write(w, b'{"method":"session/cancel"}\n')
        poll()  # no await in between: the event loop has not run
        assert got == [b'{"method":"session/cancel"}\n']


async def test_polled_and_loop_reads_keep_the_order_of_the_bytes() -> None:
    async with serving() as (w, got, poll, _):
        os.write(w, b"1")
        poll()
        os.write(w, b"2")
        with anyio.fail_after(5):
            await wait_until(lambda: b"".join(got) == b"12")  # the loop's own read takes "2"
        os.write(w, b"3")
        poll()
        assert got == [b"1", b"2", b"3"]


async def test_a_poll_reads_nothing_while_reading_is_paused() -> None:
    gate = Gate()
    async with serving(gate) as (w, got, poll, _):
        gate.paused = True
        os.write(w, b"a")
        poll()  # this read pauses the transport (too much output waits)
        assert got == [b"a"]
        os.write(w, b"b")
        poll()
        await anyio.wait_all_tasks_blocked()  # nor does the loop read, once it has run
        assert got == [b"a"]
        gate.paused = False
        gate.room.set()
        with anyio.fail_after(5):
            await wait_until(lambda: got == [b"a", b"b"])


async def test_eof_is_left_to_the_loop_and_the_poll_stops_with_the_reader() -> None:
    async with serving() as (w, got, poll, finished):
        os.write(w, b"last")
        os.close(w)
        poll()
        assert got == [b"last"]  # the data, and no EOF from the poll
        with anyio.fail_after(5):
            await wait_until(finished)
        assert got == [b"last", b""]  # the loop saw EOF and said so once
        assert not poll.active
        poll()  # harmless once the reader is gone
        assert got == [b"last", b""]


async def test_the_writer_polls_stdin_before_it_takes_each_batch() -> None:
    """A Stop read there is answered in the very batch the writer takes next."""
    from acp_bridge.transport.outbox import Outbox

    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        outbox = Outbox(write_end, pipe_size=0)
        polls: list[int] = []

        def poll() -> None:
            polls.append(outbox.backlog)
            if len(polls) == 1:
                outbox.send(b"answer\n")  # what handling a Stop read here would queue

        outbox.poll_input = poll
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.send(b"chunk\n")
            with anyio.fail_after(5):
                await outbox.drain()
            outbox.close()
        assert polls[0] == len(b"chunk\n")  # before the batch was taken
        assert os.read(read_end, 100) == b"chunk\nanswer\n"  # one batch, in order
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_the_loop_reads_stdin_at_most_read_size_at_a_time() -> None:
    """A read's buffer is allocated at its full size: asyncio's own 256 KiB
    was mapped and unmapped by malloc for each small request (`READ_SIZE`).
    A message longer than a read still arrives whole, in order."""
    from acp_bridge.transport.stdio import READ_SIZE

    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("pipe sizes cannot be set here")
    message = bytes(range(256)) * (3 * READ_SIZE // 256) + b"\n"
    async with serving() as (w, got, _, _):
        try:  # room for the whole message at once: the read size is what limits a read
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1024 * 1024)
        except OSError:
            pytest.skip("this system keeps pipes small")
        os.write(w, message)
        with anyio.fail_after(5):
            await wait_until(lambda: sum(map(len, got)) == len(message))
    assert b"".join(got) == message
    assert max(map(len, got)) <= READ_SIZE < len(message)


async def test_a_terminal_is_left_to_the_loop() -> None:
    """On a terminal, ^D is one zero-length read that is not repeated: a poll
    that took it would hide the EOF, so stdin on a terminal is never polled."""
    controller, terminal = os.openpty()
    got: list[bytes] = []
    poll = InputPoll()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_fd, terminal, got.append, None, poll)
            os.write(controller, b"hello\n")
            with anyio.fail_after(5):
                await wait_until(lambda: got == [b"hello\n"])
            assert not poll.active
            os.write(controller, b"\x04")  # ^D at the start of a line: EOF
            with anyio.fail_after(5):
                await wait_until(lambda: got == [b"hello\n", b""])
    finally:
        os.close(controller)
        os.close(terminal)
