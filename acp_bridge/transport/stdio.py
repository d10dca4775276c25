"""Reading stdin without blocking the event loop.

A daemon thread reads the raw file descriptor with ``os.read`` (which returns
whatever is available, unlike a buffered ``read(n)`` that waits for n bytes)
and hands each piece to the event loop.  It works for pipes, terminals and
regular files alike.  Being a daemon thread, it never keeps the process alive
after the server has decided to exit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import anyio.from_thread
import anyio.lowlevel

READ_SIZE = 256 * 1024


def start_reader(fd: int, on_data: Callable[[bytes], None]) -> None:
    """Call ``on_data(bytes)`` on the loop for each read; ``on_data(b"")`` at EOF."""
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
