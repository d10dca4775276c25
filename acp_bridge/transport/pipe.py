"""Tuning the stdout descriptor: non-blocking writes and a small pipe.

What the stdout pipe holds when a Stop comes is read by the editor before the
answer to that Stop, so the pipe is made small while a turn streams
(`StdoutPipe.prepare`, `StdoutPipe.narrow`) and given its full size back for
a bulk write that no Stop waits behind (`StdoutPipe.widen`, a session/load
replay).  How much of it the editor has still to read (`StdoutPipe.unread`)
lets the writer keep less than that in flight.  The writer writes what the
pipe takes now and waits for the rest (`StdoutPipe.write`).  Linux only
where it matters (``F_SETPIPE_SZ``); on other systems, and for a stdout that
is not a pipe, the sizes are left alone.
"""

from __future__ import annotations

import fcntl
import os
import stat
import termios
from array import array
from typing import Final

import anyio

__all__ = [
    "IN_FLIGHT",
    "RECHECK",
    "STALL",
    "STDOUT_PIPE_SIZE",
    "StdoutPipe",
    "set_nonblocking",
    "set_pipe_size",
    "shrink_pipe",
]

# The size the stdout pipe is set to (Linux F_SETPIPE_SZ; rounded up to a
# page).  What the pipe holds is read by the editor before the answer to a
# Stop; a default 64 KiB pipe holds about 300 chunk frames, which a client
# that reads at its own pace takes milliseconds to get through.  Two pages
# cost no throughput to a client that reads as data comes (the benchmark's
# client, which pauses after a small read, keeps the full rate as long as its
# pause is sized to the pipe it reads).
STDOUT_PIPE_SIZE: Final = 8 * 1024
# While the editor reads, the writer (`acp_bridge.transport.outbox.Outbox.run`)
# writes a new batch only once no more than this is left in the stdout pipe
# (one page of `STDOUT_PIPE_SIZE`: the pipe polls writable again exactly
# then): what it still has to read when it presses Stop stays small, while
# what queued meanwhile goes out in one batch, merged
# (`acp_bridge.transport.merge`).  The chunks still queued then are taken
# back by a Stop, so the editor sees fewer of them before it, and the
# interrupted message holds exactly those it saw.  An editor that reads
# nothing for `STALL` gets a full pipe, as without the bound.
IN_FLIGHT: Final = 4 * 1024
STALL: Final = 0.01
# How often the writer looks again at a pipe over `IN_FLIGHT` (it also does
# as soon as the pipe is writable again).
RECHECK: Final = 0.002


class StdoutPipe:
    """The stdout descriptor the ordered writer writes to."""

    __slots__ = ("_count", "_size", "_stalled_from", "_unread", "_wide", "_widened", "fd")

    def __init__(self, fd: int, size: int = STDOUT_PIPE_SIZE) -> None:
        self.fd = fd
        self._size = size
        # The pipe's size before it was made small (0: never changed), and
        # whether it is at that size again for a replay (`widen`).
        self._wide = 0
        self._widened = False
        # FIONREAD's answer, for `unread`.
        self._count = array("i", [0])
        # The unread bytes when last looked at, and since when the editor has
        # read nothing of them (None: not waiting for it).
        self._unread = 0
        self._stalled_from: float | None = None

    def prepare(self, was: int = 0) -> None:
        """Non-blocking where that is safe, and the pipe made small (``was``: the
        size it had, if the start-up's front door made it small already)."""
        set_nonblocking(self.fd)
        self._wide = shrink_pipe(self.fd, self._size) or was

    def unread(self) -> int:
        """The bytes written that the editor has not read yet.

        Known only for a pipe this process made small (and not widened for a
        replay): elsewhere 0, and the writer writes whenever stdout takes more.
        """
        if not self._wide or self._widened:
            return 0
        try:
            fcntl.ioctl(self.fd, termios.FIONREAD, self._count)
        except OSError:
            return 0
        return self._count[0]

    def write(self, data: bytes | memoryview) -> int:
        """Write what the pipe takes now; return the bytes written.

        Raises `OSError` other than ``EAGAIN`` (EPIPE and friends: the
        editor is gone); a full pipe is not an error, just fewer bytes.
        """
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, view[written:])
        except BlockingIOError:
            pass
        finally:
            view.release()
        return written

    def over_in_flight(self) -> bool:
        """Whether more than `IN_FLIGHT` waits for an editor that reads (one
        that has read nothing for `STALL` no longer counts as reading)."""
        unread = self.unread()
        if unread <= IN_FLIGHT:
            self._stalled_from = None
            return False
        now = anyio.current_time()
        if self._stalled_from is None or unread < self._unread:
            self._stalled_from = now  # the editor read something: wait for it again
        self._unread = unread
        return now - self._stalled_from < STALL

    def widen(self) -> None:
        """Give stdout its full pipe back for a bulk write (a session/load
        replay): no Stop waits behind it, and a small pipe would slow it down
        (a 100,000-record load took half as long again).  The next turn makes
        it small again (`narrow`)."""
        if self._wide and not self._widened:
            self._widened = set_pipe_size(self.fd, self._wide)

    def narrow(self) -> None:
        """Back to the small pipe before a turn streams, once the pipe holds no
        more than that (else it stays wide, and the next turn tries again)."""
        if self._widened and set_pipe_size(self.fd, self._size):
            self._widened = False


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


def set_nonblocking(fd: int) -> None:
    """Pipes and sockets are written without blocking the loop; files block briefly.

    O_NONBLOCK belongs to the open file description, which stderr shares when
    the editor redirects it into the same pipe (``2>&1``); logging would then
    fail with EAGAIN, so such a stdout stays blocking.
    """
    st = os.fstat(fd)
    if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
        return
    try:
        err = os.fstat(2)
    except OSError:
        err = None
    if err is not None and (err.st_dev, err.st_ino) == (st.st_dev, st.st_ino):
        return
    os.set_blocking(fd, False)
