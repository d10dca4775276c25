"""One writer per session: an advisory lock beside each log.

`SessionLock.acquire` takes an exclusive, non-blocking ``flock`` on
``<state>/sessions/<id>.lock`` and keeps it until `release` (or until the
process dies: the kernel drops the lock of a killed process, so a crash never
leaves a session locked for good).  A second process that tries to open the
same session gets `SessionLocked`, which names the process that holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from .reader import LOG_SUFFIX

__all__ = ["SessionLock", "SessionLocked", "lock_path"]


class SessionLocked(Exception):
    def __init__(self, path: str, holder: str) -> None:
        who = f"process {holder}" if holder else "another process"
        super().__init__(f"the session is open in {who} (lock {path})")
        self.path = path
        self.holder = holder


def lock_path(log_path: str) -> str:
    base = log_path.removesuffix(LOG_SUFFIX)
    return base + ".lock"


class SessionLock:
    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, log_path: str) -> SessionLock:
        path = lock_path(log_path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise SessionLocked(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return cls(path, fd)

    def release(self, *, remove: bool = False) -> None:
        if self._fd is None:
            return
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
