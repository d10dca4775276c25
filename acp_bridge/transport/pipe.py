"""Tuning the stdout descriptor: non-blocking writes and a small pipe.

What the stdout pipe holds when a Stop comes is read by the editor before the
answer to that Stop, so the pipe is made small (`StdoutPipe.prepare`, and
`StdoutPipe.narrow` before each turn).  How much of it the editor has still
to read (`StdoutPipe.unread`) lets the writer keep less than that in flight:
a bound that follows how fast the editor reads (`acp_bridge.transport.pace`),
with the pipe sized to it.
The writer writes what the pipe takes now and waits for the rest
(`StdoutPipe.write`).  Linux only where it matters (``F_SETPIPE_SZ``); on
other systems, and for a stdout that is not a pipe, the sizes are left alone.
"""

from __future__ import annotations

import fcntl
import os
import stat
import termios
import time
from array import array
from typing import Final

from .pace import IN_FLIGHT, IN_FLIGHT_MAX, PAGE, ReaderPace

__all__ = [
    "IN_FLIGHT",
    "IN_FLIGHT_MAX",
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


# While the editor reads, the writer (`acp_bridge.transport.outbox.Outbox.run`)
# writes a new batch only once no more than the in-flight bound is left in
# the stdout pipe (`IN_FLIGHT`, one page of `STDOUT_PIPE_SIZE`, for an editor
# that reads slowly: the pipe polls writable again exactly then): what it
# still has to read when it presses Stop stays small, while what queued
# meanwhile goes out in one batch, merged (`acp_bridge.transport.merge`).
# The chunks still queued then are taken back by a Stop, so the editor sees
# fewer of them before it, and the interrupted message holds exactly those
# it saw.  For an editor that reads fast the bound grows, up to
# `IN_FLIGHT_MAX` (`acp_bridge.transport.pace`), and the pipe with it (a
# page more than the bound).  An editor that reads nothing for `STALL` gets a full pipe, as
# without the bound.
STALL: Final = 0.01
# How often the writer looks again at a pipe over `IN_FLIGHT` (it also does
# as soon as the pipe is writable again).
RECHECK: Final = 0.002


class StdoutPipe:
    """The stdout descriptor the ordered writer writes to."""

    __slots__ = (
        "_count",
        "_current",
        "_pace",
        "_size",
        "_stalled_from",
        "_unread",
        "_wide",
        "_written",
        "fd",
    )

    def __init__(self, fd: int, size: int = STDOUT_PIPE_SIZE) -> None:
        self.fd = fd
        self._size = size
        # The pipe's size before it was made small (0: never changed).
        self._wide = 0
        # FIONREAD's answer, for `unread`.
        self._count = array("i", [0])
        # The unread bytes when last looked at, and since when the editor has
        # read nothing of them (None: not waiting for it).
        self._unread = 0
        self._stalled_from: float | None = None
        # The bytes ever written, the size the pipe has now (while this
        # process manages it), and the bound from the editor's pace.
        self._written = 0
        self._current = 0
        self._pace = ReaderPace()

    def prepare(self) -> None:
        """Non-blocking where that is safe, and the pipe made small."""
        set_nonblocking(self.fd)
        self._wide = shrink_pipe(self.fd, self._size)
        self._current = self._size if self._wide else 0

    @property
    def bound(self) -> int:
        """The in-flight bound now (`IN_FLIGHT` until the editor shows it reads fast)."""
        return self._pace.bound

    @property
    def fast(self) -> bool:
        """Whether the bound has grown: the editor drains the pipe fast and keeps up."""
        return self._pace.bound > IN_FLIGHT

    def unread(self) -> int:
        """The bytes written that the editor has not read yet.

        Known only for a pipe this process made small: elsewhere 0, and the
        writer writes whenever stdout takes more.
        """
        if not self._wide:
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
            self._written += written
        return written

    def over_in_flight(self) -> bool:
        """Whether more than the bound waits for an editor that reads (one
        that has read nothing for `STALL` no longer counts as reading).

        Each call also feeds the measure of the editor's pace, which sets the
        bound (`acp_bridge.transport.pace.ReaderPace`)."""
        unread = self.unread()
        pace = self._pace
        now = time.monotonic()  # the pace's own clock: elapsed times only
        if unread <= pace.bound:
            self._stalled_from = None
            over = False
        else:
            if self._stalled_from is None or unread < self._unread:
                self._stalled_from = now  # the editor read something: wait for it again
            self._unread = unread
            over = now - self._stalled_from < STALL
        if self._current:
            if pace.note(now, self._written - unread, unread):
                self._resize(self._size_for(pace.bound))
            elif self._current > pace.bound + PAGE and unread <= pace.bound:
                # A smaller pipe, refused while it held more: now it fits.
                self._resize(self._size_for(pace.bound))
        return over

    def _size_for(self, bound: int) -> int:
        """The pipe for ``bound``: a page more (it then polls writable exactly
        when no more than the bound is unread), from the small size to the
        original one."""
        return min(max(bound + PAGE, self._size), max(self._wide, self._size))

    @property
    def sized(self) -> bool:
        """Whether the pipe polls writable exactly when no more than the bound
        is unread (else the writer looks again after `RECHECK`)."""
        return self._current == self._pace.bound + PAGE

    def _resize(self, size: int) -> None:
        # A pipe holding more than ``size`` refuses (EBUSY): tried again later.
        if size != self._current and set_pipe_size(self.fd, size):
            self._current = size

    def narrow(self) -> None:
        """Back to the small pipe and the least bound before a turn streams
        (the editor shows its pace again), once the pipe holds no more than
        that (else it stays as it is, and the next turn tries again; a bound
        that grew takes the pipe back when the pace is next measured)."""
        if not self._current:
            return
        if self._current != self._size and set_pipe_size(self.fd, self._size):
            self._current = self._size
        self._pace.reset(time.monotonic(), self._written - self.unread())


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
