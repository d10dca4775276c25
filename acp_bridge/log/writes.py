"""Writing session log files for the ordered writer, and keeping what they refuse.

The process's ordered writer (`acp_bridge.transport.outbox.Outbox`) decides
*when* a record is written (before the frames it describes); `LogWrites`
does the writing and owns what follows from a file that does not take it:

* A failed write loses nothing.  The file keeps the bytes in its
  ``pending`` buffer (`acp_bridge.log.logfile.LogFile`), the failure is said
  once on stderr, and every later batch tries again (`retry`) until the file
  accepts them; the file's ``error`` says why while it lasts.  Once failing
  files hold more than the hold limit, the turns writing to them wait
  (`over_limit`, `wait_retry`) instead of filling the memory.
* What is still unwritten when the process exits is saved beside the log
  (`save_unwritten`), or on stderr when even that cannot be written.
* fsyncs run in worker threads beside the writer, one per file at a time,
  and turns that end in quick succession share one (group commit, at most
  one per `SYNC_INTERVAL` and file).  Records reach the OS at once, so a
  crash of the process loses nothing; only a power loss could take the last
  interval of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from .lock import SessionLocked
from .logfile import LogFileLost, LogFiles
from .writer import LogTarget

__all__ = [
    "LOG_HOLD_LIMIT",
    "LOG_RETRY_INTERVAL",
    "SYNC_INTERVAL",
    "LogWrites",
    "save_unwritten",
]

_log = logging.getLogger("acp_bridge.outbox")

# Records failing log files may hold in memory before the turns writing to
# them wait for the files to accept them again.
LOG_HOLD_LIMIT: Final = 1024 * 1024
# How often a turn held by a failing log retries it.
LOG_RETRY_INTERVAL: Final = 0.2
# The shortest time between two fsyncs of one log (see `LogWrites`).
SYNC_INTERVAL: Final = 0.25


class LogWrites:
    """The log writes of one ordered writer (see the module)."""

    def __init__(self, *, hold_limit: int = LOG_HOLD_LIMIT, files: LogFiles | None = None) -> None:
        self.hold_limit = hold_limit
        # The session log files, opened and locked on demand, few at a time.
        self.files = files if files is not None else LogFiles()
        self._failed: set[LogTarget] = set()
        self._syncing: set[LogTarget] = set()
        self._resync: set[LogTarget] = set()
        self._tg: TaskGroup | None = None
        self._closing = anyio.Event()

    # -- writing -----------------------------------------------------------

    def write(self, target: LogTarget, data: bytes) -> None:
        """Write ``data`` (after what ``target`` still holds); a failure is kept."""
        try:
            target.write(data)
        except OSError as exc:
            self._failed_with(target, exc)
        else:
            self._accepted(target)

    def check(self, target: LogTarget) -> None:
        """`LogTarget.verify` ``target`` before a turn starts.

        A failure is reported (once, on stderr) and kept like a failed write,
        then raised for the caller to refuse the turn.
        """
        try:
            target.verify()
        except OSError as exc:
            self._failed_with(target, exc)
            raise
        self._accepted(target)

    def retry(self) -> None:
        """Try again to write what failing logs hold (in order, ahead of anything newer)."""
        for target in list(self._failed):
            self.write(target, b"")

    @property
    def failing(self) -> bool:
        """Whether some log failed its last write (and keeps its records)."""
        return bool(self._failed)

    def is_failing(self, target: LogTarget) -> bool:
        return target in self._failed

    def held_bytes(self) -> int:
        """Bytes of records that failing log files keep in memory."""
        return sum(len(target.pending) for target in self._failed)

    def over_limit(self) -> bool:
        """Whether failing logs hold more than the hold limit."""
        return bool(self._failed) and self.held_bytes() > self.hold_limit

    async def wait_retry(self) -> None:
        """Wait a little, then try the failing logs again (for a turn held by them)."""
        await anyio.sleep(LOG_RETRY_INTERVAL)
        self.retry()

    def unwritten(self) -> list[LogTarget]:
        """Logs that still hold records they could not write."""
        return [target for target in self._failed if target.pending]

    def _failed_with(self, target: LogTarget, exc: OSError) -> None:
        error = f"cannot write {target.path}: {exc.strerror or exc}"
        if target.error is None:
            if isinstance(exc, SessionLocked):
                _log.error(
                    "%s; its records are kept in memory and written once the other "
                    "process has closed the session",
                    error,
                )
            elif isinstance(exc, LogFileLost):
                # Say what is true now: what the file lost is gone (the bridge
                # keeps no second copy of a log), and only records that could
                # not be written, now or later, are saved beside it at exit.
                held = len(target.pending)
                _log.error(
                    "%s; nothing more is written to it (the log would no longer read "
                    "back) and the session's next prompts are refused. %s; what was "
                    "removed from the file cannot be restored from here",
                    error,
                    f"{held} bytes of records it could not take, and any that follow, are "
                    "kept in memory and saved beside it at exit"
                    if held
                    else "No record was waiting to be written (any that follow are kept in "
                    "memory and saved beside it at exit)",
                )
            else:
                _log.error(
                    "%s; keeping %d bytes in memory, they will be written when the file "
                    "accepts them",
                    error,
                    len(target.pending),
                )
        target.error = error
        self._failed.add(target)

    def _accepted(self, target: LogTarget) -> None:
        if target in self._failed:
            self._failed.discard(target)
            _log.warning("%s is writable again; the kept records are written", target.path)
            target.error = None

    # -- fsync -------------------------------------------------------------

    def bind(self, tg: TaskGroup | None) -> None:
        """The task group fsyncs run in (None: each runs at once, in the caller)."""
        self._tg = tg

    def close(self) -> None:
        """The writer is finishing: pending fsyncs run now, not after their interval."""
        self._closing.set()

    def request_sync(self, target: LogTarget) -> None:
        """fsync ``target`` in a worker thread while the writer goes on writing.

        An fsync can take milliseconds; the stream (and the answer to a Stop)
        must not wait for it.  One sync per file at a time: a request that
        arrives during a sync runs again after it.
        """
        if target in self._syncing:
            self._resync.add(target)
        elif self._tg is None:
            self._fsync(target)
            target.close()
        else:
            self._syncing.add(target)
            self._tg.start_soon(self._sync_task, target)

    async def _sync_task(self, target: LogTarget) -> None:
        while True:
            # Group commit: turns that end in quick succession share one fsync.
            wait = target.synced_at + SYNC_INTERVAL - anyio.current_time()
            if wait > 0:
                with anyio.move_on_after(wait):
                    await self._closing.wait()
            self._resync.discard(target)
            job = target.begin_sync()
            try:
                await anyio.to_thread.run_sync(self._fsync, target, job)
            finally:
                target.end_sync()
            target.synced_at = anyio.current_time()
            if target not in self._resync:
                break
        self._syncing.discard(target)

    def _fsync(self, target: LogTarget, job: Callable[[], None] | None = None) -> None:
        try:
            if job is None:
                target.fsync()
            else:
                job()
        except OSError as exc:
            _log.error("cannot fsync %s: %s", target.path, exc.strerror or exc)


def save_unwritten(log: LogTarget) -> str:
    """Keep a copy of what ``log`` could not write; return what to tell the user.

    The copy goes to a private sibling file, ``<log>.unwritten-<pid>`` (not a
    ``.jsonl``: it starts in the middle of the session, so no reader should
    take it for a log), or, when that cannot be written either, to stderr
    after the message.
    """
    data = bytes(log.pending)
    records = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    session = os.path.basename(log.path).removesuffix(".jsonl")
    reason = log.error or "the file did not accept them"
    reason = reason.removeprefix(f"cannot write {log.path}: ")
    head = (
        f"acp-bridge: {records} record(s) ({len(data)} bytes) of session {session} could not "
        f"be written to {log.path}: {reason}"
    )
    copy = f"{log.path}.unwritten-{os.getpid()}"
    created = False
    try:
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        created = True
        try:
            view = memoryview(data)
            done = 0
            while done < len(data):
                done += os.write(fd, view[done:])
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(copy)
        return (
            f"{head}; no copy could be saved beside it ({exc.strerror or exc}), so they follow "
            f"on stderr between the markers:\n--- unwritten records of {session} ---\n"
            + data.decode("utf-8", "replace")
            + ("" if data.endswith(b"\n") else "\n")
            + f"--- end of unwritten records of {session} ---"
        )
    log.pending.clear()
    return f"{head}; a copy of them is in {copy}"
