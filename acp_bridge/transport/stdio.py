"""Reading stdin and writing stdout from the event loop.

Pipes, sockets and terminals are read with ``os.read`` when the loop says
the descriptor is readable, so a ``session/cancel`` reaches the turn without
any thread hand-off (a hand-off costs a GIL switch, up to 5 ms, under a
full-speed stream).  A regular file cannot be polled; it is read by a daemon
thread instead, which never keeps the process alive at exit.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel

READ_SIZE = 256 * 1024


def pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def read_fd(fd: int, on_data: Callable[[bytes], None]) -> None:
    """Call ``on_data(bytes)`` for each read and ``on_data(b"")`` at EOF."""
    if not pollable(fd):
        _start_reader_thread(fd, on_data)
        return
    while True:
        try:
            await anyio.wait_readable(fd)
        except PermissionError:
            # Some character devices (/dev/null) cannot be polled.
            _start_reader_thread(fd, on_data)
            return
        try:
            data = os.read(fd, READ_SIZE)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        on_data(data)
        if not data:
            return


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
