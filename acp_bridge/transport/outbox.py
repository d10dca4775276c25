"""The one ordered writer of the process.

Everything the bridge writes goes through a single `Outbox`: JSON-RPC frames
for stdout and records for the session logs, in one FIFO.  That gives the
ordering guarantees the design needs for free:

* a turn's ``session/update`` frames precede its ``session/prompt`` response
  (invariant I1), because they were queued first;
* a log record queued before a frame reaches its file before the frame
  reaches stdout, so "logged before answered" holds across a crash.

A writer task takes the whole queue at once and writes it on the event loop
(stdout in non-blocking mode when it is a pipe, waiting for writability when
the editor reads slowly), coalescing consecutive writes to the same file into
one ``write``.  While the editor is slow the next batch accumulates, so the
batch size adapts to the reader's speed.  Producers call `wait_writable` to
respect a high-water mark; `drain` waits until everything queued so far is
written; `flush_now` writes at once when the writer is idle (for an answer
someone waits on); fsyncs run in worker tasks beside the writer.

A broken stdout (the editor went away) marks the outbox ``broken``; further
stdout frames are dropped, log writes go on, and `stdout_broken` is set so the
server can treat it as a disconnect.  A failed log write is kept in memory and
retried on later batches (the delivered text must not be lost because a disk
was briefly full); the file's ``error`` says why while it lasts.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

_log = logging.getLogger("acp_bridge.outbox")

# Stream frames queued beyond this wait for the editor to read.  Everything
# queued is read by the editor before the answer to a Stop, so the mark is
# kept small (about 35 chunk frames); the writer still batches whatever
# accumulates while the pipe is busy.
HIGH_WATER: Final = 8 * 1024


class LogFile:
    """An append-only file written only through the outbox.

    Bytes that cannot be written (disk full, file size limit, permissions)
    stay in ``pending``, in order, and go out first on the next write: a
    failed write loses nothing, and a torn record can only be the last line.
    """

    __slots__ = ("_fd", "error", "path", "pending", "synced_at")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self.pending = bytearray()
        # Why the last write failed, while it is still failing.
        self.error: str | None = None
        # Event-loop time of the last fsync.
        self.synced_at = float("-inf")

    def write(self, data: bytes) -> None:
        self.pending += data  # kept first: a failed open loses nothing either
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(self.pending)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._fd, view[written:])
        finally:
            view.release()
            del self.pending[:written]

    def fsync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        elif os.path.exists(self.path):
            # Closed since its last write (after an earlier sync): sync by path.
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_FSYNC: Final = b""
# The shortest time between two fsyncs of one log (see Outbox._sync_task).
SYNC_INTERVAL: Final = 0.25
_Item = bytes | tuple[LogFile, bytes]


class Outbox:
    def __init__(self, stdout_fd: int = 1, *, high_water: int = HIGH_WATER) -> None:
        self._stdout_fd = stdout_fd
        self._high_water = high_water
        # A stdout frame is queued as bare bytes (no tuple to allocate per
        # chunk: fewer garbage-collector passes on the hot path); a log write
        # as (file, bytes), an fsync request as (file, _FSYNC).
        self._queue: list[_Item] = []
        self._queued_bytes = 0
        self._queued_gen = 0
        self._written_gen = 0
        self._wakeup = anyio.Event()
        self._progress = anyio.Event()
        self._closed = False
        self._pre_flush: list[Callable[[], None]] = []
        self._failed_logs: set[LogFile] = set()
        self.stdout_broken = anyio.Event()
        self._writing = False
        self._tg: TaskGroup | None = None
        self._closing = anyio.Event()
        self.finished = anyio.Event()
        self._syncing: set[LogFile] = set()
        self._resync: set[LogFile] = set()

    # -- producers (sync, event-loop thread) -------------------------------

    def send(self, frame: bytes) -> None:
        """Queue one stdout frame."""
        self._queue.append(frame)
        self._queued_bytes += len(frame)
        self._queued_gen += 1
        self._wakeup.set()

    def write_log(self, log: LogFile, data: bytes) -> None:
        self._queue.append((log, data))
        self._queued_gen += 1
        self._wakeup.set()

    def fsync_log(self, log: LogFile) -> None:
        self._queue.append((log, _FSYNC))
        self._queued_gen += 1
        self._wakeup.set()

    def add_pre_flush(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each batch is taken (it may queue more items)."""
        self._pre_flush.append(hook)

    def remove_pre_flush(self, hook: Callable[[], None]) -> None:
        if hook in self._pre_flush:
            self._pre_flush.remove(hook)

    @property
    def high_water(self) -> int:
        return self._high_water

    @property
    def backlog(self) -> int:
        return self._queued_bytes

    async def wait_writable(self) -> None:
        while self._queued_bytes > self._high_water and not self.stdout_broken.is_set():
            await self._wait_progress()

    async def drain(self) -> None:
        """Wait until everything queued so far has been written (or dropped)."""
        target = self._queued_gen
        while self._written_gen < target:
            await self._wait_progress()

    async def _wait_progress(self) -> None:
        if self._progress.is_set():
            self._progress = anyio.Event()
        await self._progress.wait()

    # -- the writer --------------------------------------------------------

    async def run(self) -> None:
        """The writer task.  Returns after `close` once the queue is empty."""
        _set_nonblocking(self._stdout_fd)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            while True:
                if not self._queue:
                    if self._closed:
                        break
                    await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                    continue
                batch, gen = self._take()
                self._writing = True
                try:
                    with anyio.CancelScope(shield=True):
                        await self._write_batch(batch)
                finally:
                    self._writing = False
                self._written(gen)
        self._tg = None
        self.finished.set()

    def close(self) -> None:
        """Finish: write what is queued, run the pending fsyncs now, then `run` returns."""
        self._closed = True
        self._closing.set()
        self._wakeup.set()

    def give_up_stdout(self) -> None:
        """The editor stopped reading: drop the frames it will never read, so the
        log records queued among them are written and the process can exit."""
        self.stdout_broken.set()

    def flush_now(self) -> None:
        """Write the queue from the caller, without waiting for the writer task.

        Used for an answer that someone is waiting for (a prompt's stop
        reason): it saves a trip through the event loop.  Only when the writer
        is idle, so the order of writes is kept; what would block is left to
        the writer.
        """
        if self._writing or not self._queue:
            return
        batch, gen = self._take()
        rest = self._write_ready(batch)
        if rest:
            self._queue[:0] = rest
            self._queued_bytes += sum(len(item) for item in rest if type(item) is bytes)
            self._wakeup.set()
        else:
            self._written(gen)

    def _take(self) -> tuple[list[_Item], int]:
        for hook in self._pre_flush:
            hook()
        batch, self._queue = self._queue, []
        self._queued_bytes = 0
        # The batch's log records go first, in their order, then its frames:
        # a record of delivered text (the stream/delta the hook above just
        # queued after its frames) reaches the OS no later than the frames
        # it describes, so a kill between the two writes loses nothing the
        # editor got (invariant I4).
        frames: list[_Item] = [item for item in batch if type(item) is bytes]
        if frames and len(frames) < len(batch):
            batch = [item for item in batch if type(item) is not bytes] + frames
        return batch, self._queued_gen

    def _written(self, gen: int) -> None:
        self._written_gen = gen
        self._progress.set()

    async def _write_batch(self, batch: list[_Item]) -> None:
        rest = self._write_ready(batch)
        while rest:  # stdout would block: wait for the editor to read
            with anyio.move_on_after(0.1):  # ...but notice give_up_stdout()
                await anyio.wait_writable(self._stdout_fd)
            rest = self._write_ready(rest)
        for log in list(self._failed_logs):
            self._write_log(log, b"")

    def _write_ready(self, batch: list[_Item]) -> list[_Item]:
        """Write items in order, consecutive ones for the same target in one call,
        until stdout would block; return what is left.  fsync requests are
        handed to a worker thread on the way."""
        i, n = 0, len(batch)
        while i < n:
            item = batch[i]
            j = i + 1
            if isinstance(item, bytes):
                frames = [item]
                while j < n and isinstance(next_item := batch[j], bytes):
                    frames.append(next_item)
                    j += 1
                data = b"".join(frames) if len(frames) > 1 else item
                written = self._write_stdout(data)
                if written < len(data):
                    return [data[written:], *batch[j:]]
                i = j
                continue
            target, first = item
            if first is _FSYNC:
                self._request_sync(target)
                i = j
                continue
            chunks = [first]
            while j < n:
                other = batch[j]
                if isinstance(other, bytes) or other[0] is not target or other[1] is _FSYNC:
                    break
                chunks.append(other[1])
                j += 1
            self._write_log(target, b"".join(chunks))
            i = j
        return []

    def _write_log(self, target: LogFile, data: bytes) -> None:
        try:
            target.write(data)
        except OSError as exc:
            error = f"cannot write {target.path}: {exc.strerror or exc}"
            if target.error is None:
                _log.error(
                    "%s; keeping %d bytes in memory, they will be written when the file "
                    "accepts them",
                    error,
                    len(target.pending),
                )
            target.error = error
            self._failed_logs.add(target)
        else:
            if target in self._failed_logs:
                self._failed_logs.discard(target)
                _log.warning("%s is writable again; the kept records are written", target.path)
                target.error = None

    def _write_stdout(self, data: bytes) -> int:
        """Write what the pipe takes now; return the bytes written (all, once broken)."""
        if self.stdout_broken.is_set():
            return len(data)
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                written += os.write(self._stdout_fd, view[written:])
        except BlockingIOError:
            pass
        except OSError:  # EPIPE and friends: the editor is gone
            self.stdout_broken.set()
            return len(data)
        finally:
            view.release()
        return written

    def _request_sync(self, log: LogFile) -> None:
        """fsync ``log`` in a worker thread while the writer goes on writing.

        An fsync can take milliseconds; the stream (and the answer to a Stop)
        must not wait for it.  One sync per file at a time: a request that
        arrives during a sync runs again after it.
        """
        if log in self._syncing:
            self._resync.add(log)
        elif self._tg is None:
            self._fsync(log)
            log.close()
        else:
            self._syncing.add(log)
            self._tg.start_soon(self._sync_task, log)

    async def _sync_task(self, log: LogFile) -> None:
        while True:
            # Group commit: turns that end in quick succession share one
            # fsync.  Records reach the OS at once (a crash of the process
            # loses nothing); only a power loss could take the last
            # SYNC_INTERVAL of them.
            wait = log.synced_at + SYNC_INTERVAL - anyio.current_time()
            if wait > 0:
                with anyio.move_on_after(wait):
                    await self._closing.wait()
            self._resync.discard(log)
            await anyio.to_thread.run_sync(self._fsync, log)
            log.synced_at = anyio.current_time()
            if log not in self._resync:
                break
        self._syncing.discard(log)
        # Released until the next write, so idle sessions hold no descriptor
        # (thousands of sessions must not exhaust them).  Closed here on the
        # loop, never in the worker thread, so no write races with the close.
        log.close()

    def _fsync(self, log: LogFile) -> None:
        try:
            log.fsync()
        except OSError as exc:
            _log.error("cannot fsync %s: %s", log.path, exc.strerror or exc)


def _set_nonblocking(fd: int) -> None:
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
