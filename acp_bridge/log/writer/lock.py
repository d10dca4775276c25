"""One writer per session: an advisory lock on the log file itself.

A process that writes a session's log holds an exclusive, non-blocking
``flock`` on the descriptor it writes the log through (`lock_log`).  The lock
belongs to the log's own inode, so nothing beside it can be deleted to lift
it; removing or replacing the log is noticed by the writer instead (see
`acp_bridge.log.writer.files`).  The kernel drops the lock of a process that
dies, so a crash never leaves a session locked for good.  A process that
tries to lock a log another one holds gets `SessionLocked`, which names the
holder when the system says who it is (``/proc/locks`` on Linux).
"""

from __future__ import annotations

import errno
import fcntl
import os

__all__ = ["SessionLocked", "lock_log", "unlock_log"]

_PROC_LOCKS = "/proc/locks"


class SessionLocked(OSError):
    """The log is locked by another process (or another descriptor of this one)."""

    def __init__(self, path: str, holder: str) -> None:
        who = f"process {holder}" if holder else "another process"
        super().__init__(errno.EWOULDBLOCK, f"the session is open in {who}")
        self.path = path
        self.holder = holder


def lock_log(fd: int, path: str) -> None:
    """Take the exclusive lock of the log open on ``fd``; `SessionLocked` if taken."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLocked(path, holder_of(fd)) from None


def unlock_log(fd: int) -> None:
    """Give up the lock of the log open on ``fd`` (the descriptor stays open)."""
    fcntl.flock(fd, fcntl.LOCK_UN)


def holder_of(fd: int) -> str:
    """The pid that holds a ``flock`` on the file open on ``fd``, or "" if unknown."""
    try:
        st = os.fstat(fd)
        with open(_PROC_LOCKS, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in text.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146437 0 EOF"; a waiter has "->".
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            return fields[4]
    return ""
