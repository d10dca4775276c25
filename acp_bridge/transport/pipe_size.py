"""The stdout pipe's size: what it is set to, and setting it (no event loop here).

Apart from `acp_bridge.transport.pipe` so that the start-up's front door
(`acp_bridge.front_door`), which answers before anyio is imported, sizes the
pipe with the same code and the same figure as the server's writer.
"""

from __future__ import annotations

import fcntl
import os
import stat
from typing import Final

__all__ = ["STDOUT_PIPE_SIZE", "set_pipe_size", "shrink_pipe"]

# The size the stdout pipe is set to (Linux F_SETPIPE_SZ; rounded up to a
# page).  What the pipe holds is read by the editor before the answer to a
# Stop; a default 64 KiB pipe holds about 300 chunk frames, which a client
# that reads at its own pace takes milliseconds to get through.  Two pages
# cost no throughput to a client that reads as data comes (the benchmark's
# client, which pauses after a small read, keeps the full rate as long as its
# pause is sized to the pipe it reads).
STDOUT_PIPE_SIZE: Final = 8 * 1024


def shrink_pipe(fd: int, size: int) -> int:
    """Bound what a stdout pipe holds (see STDOUT_PIPE_SIZE); 0 leaves it alone.

    Only ever made smaller, and only where the system allows it (Linux);
    elsewhere, or when the pipe holds more than that already, it stays as is.
    Returns the size it had when it was made smaller, else 0.
    """
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    if not size or get_size is None:
        return 0
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return 0
        before = int(fcntl.fcntl(fd, get_size))
    except OSError:
        return 0
    return before if before > size and set_pipe_size(fd, size) else 0


def set_pipe_size(fd: int, size: int) -> bool:
    """Set a pipe's size; False where the system refuses (EBUSY: it holds more)."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return False
    try:
        fcntl.fcntl(fd, set_size, size)
    except OSError:
        return False
    return True
