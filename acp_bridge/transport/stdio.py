"""Reading stdin from the event loop.

Pipes, sockets and terminals are read by an asyncio read-pipe protocol: the
bytes are handed to the connection inside the loop's own poll step, with no
task to wake and no thread hand-off, so a ``session/cancel`` reaches its turn
as soon as the loop polls.  (The project runs on anyio's asyncio backend
only; asyncio is used directly in the transport, and nowhere else.)
What cannot be polled (a regular file, ``/dev/null``) is read by a daemon
thread instead, which never keeps the process alive at exit.

A busy task can also read stdin itself (`InputPoll`): a turn streaming at
full rate keeps the loop busy, and the loop polls stdin only between the
tasks it runs, so a ``session/cancel`` would wait for the stream's current
slice of work and for one more.  The turn calls the poll at each slice
boundary instead, and the bytes go to the connection at once, in order with
every other read (same thread, same descriptor).

Input backpressure: while too much output waits for the editor (an editor
that writes without reading), stdin is not read, so the answers cannot
pile up in memory; reading resumes once the editor has read them.
"""

from __future__ import annotations

import asyncio
import os
import select
import stat
import threading
from collections.abc import Callable
from typing import Any, Protocol, cast

import anyio
import anyio.from_thread
import anyio.lowlevel

# The most one read of stdin takes.  Under malloc's mmap threshold (128 KiB
# by default): a read's buffer is allocated at its full size and then shrunk
# to what came, and a 256 KiB one (asyncio's own ``max_size``) was mapped,
# shrunk and unmapped for every request, about 12 µs of a one-line turn in
# the kernel; one of 64 KiB comes from the heap.  A longer message is read
# in more pieces, which the framer joins.
READ_SIZE = 64 * 1024


class Backpressure(Protocol):
    def input_paused(self) -> bool:
        """Whether stdin should not be read for now."""

    async def wait_input_room(self) -> None:
        """Return once stdin may be read again."""


class InputPoll:
    """Reads what stdin holds now, from the task that calls it (see the module doc).

    Does nothing until `read_fd` serves a pollable stdin, nor while reading
    is paused for backpressure or the input is closing.  EOF is left to the
    loop's own read, which sees it again.
    """

    __slots__ = ("_read",)

    def __init__(self) -> None:
        self._read: Callable[[], None] = _nothing

    def __call__(self) -> None:
        self._read()

    @property
    def active(self) -> bool:
        """Whether a call reads stdin (`read_fd` serves it, and it can be polled)."""
        return self._read is not _nothing


class _Reader(asyncio.Protocol):
    def __init__(
        self, on_data: Callable[[bytes], None], done: anyio.Event, gate: Backpressure | None
    ) -> None:
        self._on_data = on_data
        self._done = done
        self._gate = gate
        self.transport: asyncio.ReadTransport | None = None
        # Set when reading was paused; the resumer waits for it.
        self.paused = anyio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.transport = transport
        if hasattr(transport, "max_size"):  # asyncio's pipe transport: see READ_SIZE
            cast(Any, transport).max_size = READ_SIZE

    def data_received(self, data: bytes) -> None:
        self._on_data(data)
        gate = self._gate
        if gate is not None and gate.input_paused() and self.transport is not None:
            self.transport.pause_reading()
            self.paused.set()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_data(b"")
        self._done.set()


async def read_fd(
    fd: int,
    on_data: Callable[[bytes], None],
    gate: Backpressure | None = None,
    poll: InputPoll | None = None,
) -> None:
    """Call ``on_data(bytes)`` for each read and ``on_data(b"")`` at EOF.

    After each read, if ``gate.input_paused()``, reading stops until
    ``gate.wait_input_room()`` returns.  ``poll``, when given, reads stdin
    from its caller while this serves it.
    """
    loop = asyncio.get_running_loop()
    if not _pollable(loop, fd):
        _start_reader_thread(fd, on_data, gate)
        return
    done = anyio.Event()
    pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
    transport, reader = await loop.connect_read_pipe(lambda: _Reader(on_data, done, gate), pipe)
    if poll is not None and not stat.S_ISCHR(os.fstat(fd).st_mode):
        # Not a terminal: its EOF (^D) is one zero-length read, not repeated,
        # which the loop's own read must be the one to see.  Someone typing
        # needs no microsecond Stop either.
        poll._read = _inline_reader(transport, reader, pipe.fileno())
    try:
        if gate is None:
            await done.wait()
            return
        async with anyio.create_task_group() as tg:

            async def resume_when_drained() -> None:
                while True:
                    await reader.paused.wait()
                    reader.paused = anyio.Event()
                    await gate.wait_input_room()
                    if not transport.is_closing():
                        transport.resume_reading()

            tg.start_soon(resume_when_drained)
            await done.wait()
            tg.cancel_scope.cancel()
    finally:
        if poll is not None:
            poll._read = _nothing
        transport.close()


def _inline_reader(
    transport: asyncio.ReadTransport, reader: _Reader, fd: int
) -> Callable[[], None]:
    # A poll costs a third of a failing read (no exception to raise), and
    # it is asked for every few chunks of a stream.
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poll = poller.poll

    def read_now() -> None:
        if not poll(0) or transport.is_closing() or not transport.is_reading():
            return
        try:
            data = os.read(fd, READ_SIZE)  # non-blocking: the transport made it so
        except OSError:
            return  # taken meanwhile (EAGAIN), or an error the loop's read reports
        if data:
            reader.data_received(data)

    return read_now


def _pollable(loop: asyncio.AbstractEventLoop, fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    try:  # some character devices (/dev/null) refuse to be polled
        loop.add_reader(fd, _nothing)
    except (OSError, ValueError):
        return False
    loop.remove_reader(fd)
    return True


def _nothing() -> None:
    pass


def _start_reader_thread(
    fd: int, on_data: Callable[[bytes], None], gate: Backpressure | None
) -> None:
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                data = b""
            try:
                anyio.from_thread.run_sync(on_data, data, token=token)
                if not data:
                    return
                if gate is not None:
                    anyio.from_thread.run(gate.wait_input_room, token=token)
            except RuntimeError:
                return  # the event loop is gone

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()
