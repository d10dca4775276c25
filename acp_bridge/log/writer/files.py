"""The session log files on disk, and the writes the ordered writer makes to them.

`LogFile` is the file of one session: locked, checked before it is written,
and open only while it is in use.  It is written only through the process's
ordered writer (`acp_bridge.transport.outbox.Outbox`, through `LogWrites`
below).  Three guarantees:

* One writer.  The descriptor a log is written through holds the session's
  lock (`acp_bridge.log.writer.lock.lock_log`, a ``flock`` on the log
  itself), taken each time the file is opened.  A process that finds the
  lock taken writes nothing and keeps its records in memory
  (`SessionLocked`, retried later).
* The file is the one this process wrote.  The log knows the file's identity
  (device, inode) and how many bytes it wrote there.  Before each write, one
  ``fstat`` of the open descriptor checks that the file still has a name and
  exactly that size; on each open, the path must name that same file with
  that size.  A file deleted, replaced, cut short or written by someone else
  makes the log *lost* for good (`LogFileLost`): its records stay in memory
  and are saved beside it at exit (`save_unwritten`), because appending
  would make a log no reader accepts.  `LogFile.verify`
  (before a turn starts) also looks the path up, so a file moved away is
  noticed before a prompt streams.
* Few descriptors.  `LogFiles` keeps the open logs in least-recently-used
  order and closes the oldest beyond a share of the descriptor limit
  (`open_logs_limit`), or all idle ones when an open fails with "too many
  open files".  A closed log is opened again, locked and checked, on its next
  write.  So thousands of sessions can be open in one process; the lock of a
  session whose descriptor was closed is no longer held, but nothing can be
  written behind this process's back unnoticed: the next open finds the lock
  taken or the size changed, and writes nothing.

Bytes that cannot be written (disk full, file size limit, permissions, a lost
file) stay in ``pending``, in order, and go out first on the next write: a
failed write loses nothing, and a torn record can only be the last line.

The ordered writer decides *when* a record is written (before the frames it
describes); `LogWrites` does the writing and owns what follows from a file
that does not take it:

* A failed write loses nothing.  The file keeps the bytes in its ``pending``
  buffer, the failure is said once on stderr, and every later batch tries
  again (`retry`) until the file accepts them; the file's ``error`` says why
  while it lasts.  Once failing files hold more than the hold limit, the
  turns writing to them wait (`over_limit`, `wait_retry`) instead of filling
  the memory.
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
import errno
import logging
import os
import resource
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Final, NoReturn

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from . import LogTarget
from .lock import SessionLocked, lock_log, unlock_log

__all__ = [
    "LOG_HOLD_LIMIT",
    "LOG_RETRY_INTERVAL",
    "SYNC_INTERVAL",
    "LogFile",
    "LogFileLost",
    "LogFiles",
    "LogWrites",
    "open_logs_limit",
    "save_unwritten",
    "write_new_file",
]

# The open logs a process keeps: a quarter of its descriptor limit, within
# these bounds (the rest is for tools, providers, pipes).
OPEN_LOGS_MIN: Final = 4
OPEN_LOGS_MAX: Final = 1024

_OUT_OF_DESCRIPTORS: Final = (errno.EMFILE, errno.ENFILE)


class LogFileLost(OSError):
    """The path no longer names the file this log was writing, or the file
    changed behind the log's back (deleted, replaced, cut short, written by
    another program)."""


def open_logs_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return OPEN_LOGS_MAX
    return max(OPEN_LOGS_MIN, min(OPEN_LOGS_MAX, soft // 4))


class LogFiles:
    """The log files of a process: which are open, in least-recently-used order,
    and the locks taken before a session's log is read (`claim`)."""

    def __init__(self, limit: Callable[[], int] = open_logs_limit) -> None:
        self._limit = limit
        self._open: OrderedDict[LogFile, None] = OrderedDict()
        self._claimed: dict[str, LogFile] = {}

    def claim(self, path: str) -> LogFile:
        """Open and lock the existing log at ``path`` before it is read.

        `SessionLocked` if another process holds it.  The next `take` of the
        same path returns this file, still locked, so no other process can
        write between the read and the first append.
        """
        file = LogFile(path, create=False, pool=self)
        try:
            file.open()
        except LogFileLost:
            raise FileNotFoundError(errno.ENOENT, "no such session log", path) from None
        self._claimed[path] = file
        return file

    def take(self, path: str, *, create: bool = True) -> LogFile:
        """The file a session log writes to: the one claimed for ``path``, else a new one."""
        file = self._claimed.pop(path, None)
        if file is None:
            return LogFile(path, create=create, pool=self)
        file.adopt_size()
        return file

    def release(self, file: LogFile) -> None:
        """Close ``file`` (and forget its claim, if it was never taken): its session
        is closed, so the lock goes now, even while a worker thread still syncs the
        descriptor (which then closes after the sync): an editor that opens the
        session again right after ``session/close`` is never refused."""
        if self._claimed.get(file.path) is file:
            del self._claimed[file.path]
        file.unlock()
        file.close()

    def close_idle(self) -> None:
        """Close every open log (each opens again on its next write; one being
        synced is closed once its sync is done)."""
        for file in list(self._open):
            file.close()

    # -- for LogFile ---------------------------------------------------------

    def open_fd(self, path: str, flags: int) -> int:
        try:
            return os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS or not self._open:
                raise
        self.close_idle()
        return os.open(path, flags, 0o600)

    def opened(self, file: LogFile) -> None:
        self._open[file] = None
        over = len(self._open) - self._limit()
        if over <= 0:
            return
        for oldest in list(self._open):
            if over <= 0 or oldest is file:
                break
            if not oldest.syncing:  # a sync in a worker thread uses its descriptor
                oldest.close()
                over -= 1

    def used(self, file: LogFile) -> None:
        try:
            self._open.move_to_end(file)
        except KeyError:  # closed, but its descriptor waited for a sync: open again
            self._open[file] = None
            file.keep_open()

    def closed(self, file: LogFile) -> None:
        self._open.pop(file, None)


class LogFile:
    """An append-only file written only through the outbox (see the module)."""

    __slots__ = (
        "_close_later",
        "_create",
        "_fd",
        "_ident",
        "_pool",
        "_size",
        "_syncs",
        "error",
        "lost",
        "path",
        "pending",
        "synced_at",
    )

    def __init__(self, path: str, *, create: bool = True, pool: LogFiles | None = None) -> None:
        self.path = path
        # Whether the first open may create the file: only for a log that
        # starts at seq 0 (a log continued from its records must exist).
        self._create = create
        self._pool = pool if pool is not None else LogFiles()
        self._fd: int | None = None
        # (st_dev, st_ino) of the file, once it was opened.
        self._ident: tuple[int, int] | None = None
        # Syncs running in a worker thread (`begin_sync`), and whether the
        # descriptor is to be closed when the last of them is done.
        self._syncs = 0
        self._close_later = False
        # The bytes the file holds, as far as this process knows (-1: not
        # known yet, taken from the file when it is next opened).
        self._size = -1
        self.pending = bytearray()
        # Why the last write failed, while it is still failing.
        self.error: str | None = None
        # Why the file can never be written again, once that happened.
        self.lost: str | None = None
        # Event-loop time of the last fsync.
        self.synced_at = float("-inf")

    def write(self, data: bytes) -> None:
        self.pending += data  # kept first: a failed write or open loses nothing
        self._write_pending()

    def verify(self) -> None:
        """Check that the path still names this log's file, unchanged since this
        process wrote it, and that the lock is ours; then write what is pending.

        Called before a turn starts, so a prompt never streams into a log
        that cannot take its records.  Raises what `write` raises.
        """
        fd = self._fd
        if self.lost is None and fd is not None and self._ident is not None:
            try:
                st = os.stat(self.path)
            except (FileNotFoundError, NotADirectoryError):
                self._lose("the file or its folder was deleted or moved")
            if (st.st_dev, st.st_ino) != self._ident:
                self._lose("another file was put in its place")
            # The path names the open file itself: its stat is the
            # descriptor's (a name, and the size), so `_check_open`'s fstat
            # would only repeat it.
            self._check_size(st.st_size)
            self._write_open(fd)
            return
        self._write_pending()

    def _write_pending(self) -> None:
        if self.lost is not None:
            raise LogFileLost(errno.ESTALE, self.lost)
        fd = self._fd
        if fd is None:
            fd = self.open()
            if self.pending:
                self._write_fd(fd)
        else:
            self._check_open(fd)
            self._write_open(fd)

    def _write_open(self, fd: int) -> None:
        """Write ``pending`` through ``fd``, this log's descriptor, checked by the caller."""
        self._pool.used(self)
        if self.pending:
            self._write_fd(fd)

    def _write_fd(self, fd: int) -> None:
        """Write ``pending`` through ``fd`` (checked by the caller)."""
        view = memoryview(self.pending)
        written = 0
        try:
            while written < len(view):
                written += os.write(fd, view[written:])
        finally:
            view.release()
            del self.pending[:written]
            self._size += written

    def open(self) -> int:
        """Open the file, take its lock and check it is the file this log wrote."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        create = self._ident is None and self._create
        try:
            fd = self._pool.open_fd(self.path, flags | (os.O_CREAT if create else 0))
        except FileNotFoundError:
            if create:
                raise  # no folder yet: kept, and tried again on the next write
            # The file this log started, or continues, must be there.
            self._lose("the file or its folder was deleted")
        try:
            lock_log(fd, self.path)
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        ident = (st.st_dev, st.st_ino)
        if self._ident is None:
            self._ident = ident
        elif ident != self._ident:
            os.close(fd)
            self._lose("another file was put in its place")
        if self._size < 0:
            self._size = st.st_size
        elif st.st_size != self._size:
            os.close(fd)
            self._lose(self._changed(st.st_size))
        self._fd = fd
        self._pool.opened(self)
        return fd

    def adopt_size(self) -> None:
        """Take the file's size as this log's own (the claimed file was read,
        and perhaps had a torn last line cut, while its lock was held)."""
        self._size = os.fstat(self._fd).st_size if self._fd is not None else -1

    def _check_open(self, fd: int) -> None:
        st = os.fstat(fd)
        if st.st_nlink == 0:
            self._lose("the file was deleted or another was put in its place")
        self._check_size(st.st_size)

    def _check_size(self, size: int) -> None:
        """The file holds what this log wrote, and nothing else."""
        if size != self._size:
            self._lose(self._changed(size))

    def _changed(self, size: int) -> str:
        if size < self._size:
            return f"the file was cut short (it holds {size} of the {self._size} bytes written)"
        return f"something else wrote to the file (it holds {size} bytes, {self._size} from here)"

    def _lose(self, why: str) -> NoReturn:
        self.close()
        self.lost = f"{why} while the session was running"
        raise LogFileLost(errno.ESTALE, self.lost)

    @property
    def syncing(self) -> bool:
        return self._syncs > 0

    def fsync(self) -> None:
        """Sync the file now, in the caller's thread."""
        if self._fd is not None:
            os.fsync(self._fd)
        elif self._ident is not None and self.lost is None:
            _fsync_path(self.path, self._ident)

    def begin_sync(self) -> Callable[[], None]:
        """An fsync of this file to run in a worker thread (taken on the loop);
        `end_sync` on the loop once it has run.

        Meanwhile the descriptor it syncs stays open: the log is not closed
        for other logs (`LogFiles`), and a `close` waits for `end_sync`.  A
        closed log is synced at its path, if that is still this file.
        """
        self._syncs += 1
        if self._fd is not None:
            return partial(os.fsync, self._fd)
        if self._ident is None or self.lost is not None:
            return _nothing
        return partial(_fsync_path, self.path, self._ident)

    def keep_open(self) -> None:
        """Written again after a `close` that waited for a sync: not closed after all."""
        self._close_later = False

    def end_sync(self) -> None:
        self._syncs -= 1
        if not self._syncs and self._close_later:
            self.close()

    def unlock(self) -> None:
        """Give up the session's lock now; nothing is written through this file after."""
        if self._fd is not None:
            unlock_log(self._fd)

    def close(self) -> None:
        if self._fd is None:
            return
        self._pool.closed(self)
        if self._syncs:
            self._close_later = True  # a worker thread syncs it: closed after
            return
        fd, self._fd = self._fd, None
        self._close_later = False
        os.close(fd)


def _fsync_path(path: str, ident: tuple[int, int]) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # gone: the next write reports it
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) == ident:
            os.fsync(fd)
    finally:
        os.close(fd)


def _nothing() -> None:
    pass


# -- the writes of the ordered writer ----------------------------------------

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

    def __init__(self) -> None:
        # The session log files, opened and locked on demand, few at a time.
        self.files = LogFiles()
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
        return bool(self._failed) and self.held_bytes() > LOG_HOLD_LIMIT

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
    try:
        write_new_file(copy, data)
    except OSError as exc:
        return (
            f"{head}; no copy could be saved beside it ({exc.strerror or exc}), so they follow "
            f"on stderr between the markers:\n--- unwritten records of {session} ---\n"
            + data.decode("utf-8", "replace")
            + ("" if data.endswith(b"\n") else "\n")
            + f"--- end of unwritten records of {session} ---"
        )
    log.pending.clear()
    return f"{head}; a copy of them is in {copy}"


def write_new_file(path: str, data: bytes) -> None:
    """Create ``path`` (private, never over an existing file) holding ``data``,
    synced; a file that could not be written whole is removed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        os.close(fd)
