"""Reading stdin from the event loop.

Pipes, sockets and terminals are read by an asyncio read-pipe protocol: the
bytes are handed to the connection inside the loop's own poll step, with no
task to wake and no thread hand-off, so a ``session/cancel`` reaches its turn
as soon as the loop polls.  (The project runs on anyio's asyncio backend
only; this is the one place that uses asyncio directly, for that reason.)
What cannot be polled (a regular file, ``/dev/null``) is read by a daemon
thread instead, which never keeps the process alive at exit.
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

READ_SIZE = 256 * 1024


class _Reader(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], done: anyio.Event) -> None:
        self._on_data = on_data
        self._done = done

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_data(b"")
        self._done.set()


async def read_fd(fd: int, on_data: Callable[[bytes], None]) -> None:
    """Call ``on_data(bytes)`` for each read and ``on_data(b"")`` at EOF."""
    loop = asyncio.get_running_loop()
    if not _pollable(loop, fd):
        _start_reader_thread(fd, on_data)
        return
    done = anyio.Event()
    pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: _Reader(on_data, done), pipe)
    try:
        await done.wait()
    finally:
        transport.close()


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


def _start_reader_thread(fd: int, on_data: Callable[[bytes], None]) -> None:
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                data = b""
            try:
                anyio.from_thread.run_sync(on_data, data, token=token)
            except RuntimeError:
                return  # the event loop is gone
            if not data:
                return

    threading.Thread(target=pump, name="acp-stdin", daemon=True).start()
