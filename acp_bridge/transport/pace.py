"""How fast the editor reads stdout, and how much may wait in the pipe for it.

What the stdout pipe holds when the user presses Stop is read before the
answer, so the writer keeps little in flight (`acp_bridge.transport.pipe`).
How little is a matter of time, not bytes: an editor that reads 4 MB/s (it
renders between reads) gets through 4 KiB in a millisecond, one that reads
as fast as the bridge writes gets through ten times that in the same time,
and a bound sized for the first throttles the second.  `ReaderPace` measures
how fast the editor drains the pipe, over windows of `WINDOW`, and sets the
bound from it, one of `BOUNDS`: a page less than a pipe size (the pipe is
sized to the bound, and polls writable exactly when no more than the bound
is unread), from `IN_FLIGHT` to `IN_FLIGHT_MAX`:

* an editor that takes more than the least bound at once, emptying the pipe
  within `AHEAD` of a look that found more than that unread (twice in a
  window: an editor that reads a page at a time, a millisecond apart, never
  does, however late the writer looks), or that reads more than two pages a millisecond and
  kept up (at some moment of the window, less than a page was unread),
  gets the next bound: room for an editor that is
  briefly off the CPU (an editor that reads 4 KiB a millisecond, one that
  renders between reads, reads 4 MB/s and never empties more than a page at
  once);
* one that fell behind (more than it reads in a millisecond was unread all
  through the window) gets the largest bound no more than what it reads in
  a millisecond (`AHEAD`), never more than it had;
* otherwise (a stream slower than the editor) the bound stays.

Each turn starts at `IN_FLIGHT` (`reset`): an editor shows its pace again
before it gets more.  Merged frames (`acp_bridge.transport.merge`) carry
fewer bytes per chunk: an editor that keeps up with them reads few bytes a
millisecond, which is why emptying the pipe counts as well.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AHEAD",
    "BOUNDS",
    "IN_FLIGHT",
    "IN_FLIGHT_MAX",
    "PAGE",
    "WINDOW",
    "ReaderPace",
]

PAGE: Final = 4096
# The bounds, each a page less than a pipe size (8 KiB to 64 KiB, the size a
# pipe has by default).  The least, and the bound of every turn until the
# editor shows it reads faster: one page.
BOUNDS: Final = (PAGE, 3 * PAGE, 7 * PAGE, 15 * PAGE)
IN_FLIGHT: Final = BOUNDS[0]
IN_FLIGHT_MAX: Final = BOUNDS[-1]
# How long a window of the measure is: long enough that a reader that
# reads once a millisecond shows its pace, not the burst of one read.
WINDOW: Final = 0.008
# An editor that fell behind gets what it reads in this long: what the
# answer to a Stop waits behind.
AHEAD: Final = 0.001


class ReaderPace:
    """The in-flight bound of stdout, from how fast the editor drains it."""

    __slots__ = ("_drains", "_last", "_least", "_read0", "_t0", "_unread", "bound")

    def __init__(self) -> None:
        self.bound = IN_FLIGHT
        self._t0 = 0.0
        self._read0 = 0
        # The least the pipe held unread at a look in this window, the unread
        # bytes and the time of the last look, and how often in this window
        # the editor emptied at once a pipe that held more than `IN_FLIGHT`.
        self._least = _NEVER
        self._unread = 0
        self._last = 0.0
        self._drains = 0

    def reset(self, now: float, read: int) -> None:
        """Back to `IN_FLIGHT`, a new window from ``now`` (``read``: the
        bytes the editor has read so far)."""
        self.bound = IN_FLIGHT
        self._t0, self._read0 = now, read
        self._least, self._unread, self._last, self._drains = _NEVER, 0, now, 0

    @property
    def fast(self) -> bool:
        """Whether the editor has shown it reads faster than the least bound needs."""
        return self.bound > IN_FLIGHT

    def note(self, now: float, read: int, unread: int) -> bool:
        """The writer looked at the pipe: ``unread`` bytes in it, ``read``
        bytes read by the editor so far.  Closes the window once it is
        `WINDOW` old; True then (the bound may have changed)."""
        if unread < self._least:
            self._least = unread
        if not unread and self._unread > IN_FLIGHT and now - self._last < AHEAD:
            self._drains += 1
        self._unread, self._last = unread, now
        elapsed = now - self._t0
        if elapsed < WINDOW:
            return False
        read_ahead = (read - self._read0) / elapsed * AHEAD
        old, least = self.bound, self._least
        if self._drains >= 2 or (least < PAGE and read_ahead >= 2 * PAGE):
            self.bound = next((b for b in BOUNDS if b > old), IN_FLIGHT_MAX)
        elif least > read_ahead:
            self.bound = max(b for b in BOUNDS if b <= max(min(read_ahead, old), IN_FLIGHT))
        self._t0, self._read0 = now, read
        self._least, self._drains = _NEVER, 0
        return True


_NEVER: Final = 1 << 62
