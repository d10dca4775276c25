"""The one ordered writer of the process.

Everything the bridge writes goes through a single `Outbox`: JSON-RPC frames
for stdout and records for the session logs, in one FIFO.  That gives the
ordering guarantees the design needs for free:

* a turn's ``session/update`` frames precede its ``session/prompt`` response
  (invariant I1), because they were queued first;
* a log record queued before a frame reaches its file before the frame
  reaches stdout, so "logged before answered" holds across a crash.

A writer task takes the whole queue at once and writes it in a worker thread,
coalescing consecutive writes to the same file into one ``write``.  While one
batch is being written the next one accumulates, so the batch size adapts to
the reader's speed.  Producers call `wait_writable` to respect a high-water
mark; `drain` waits until everything queued so far is written.

A broken stdout (the editor went away) marks the outbox ``broken``; further
stdout frames are dropped, log writes go on, and `stdout_broken` is set so the
server can treat it as a disconnect.  A failed log write is kept in memory and
retried on later batches (the delivered text must not be lost because a disk
was briefly full); `log_error` describes the last failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread

HIGH_WATER: Final = 32 * 1024


class LogFile:
    """An append-only file written only through the outbox."""

    __slots__ = ("_fd", "path", "pending")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        # Bytes that could not be written yet (disk full, permissions).
        self.pending = bytearray()

    def write(self, data: bytes) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.pending += data
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

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_STDOUT: Final = None
_FSYNC: Final = b""


class Outbox:
    def __init__(self, stdout_fd: int = 1, *, high_water: int = HIGH_WATER) -> None:
        self._stdout_fd = stdout_fd
        self._high_water = high_water
        self._queue: list[tuple[LogFile | None, bytes]] = []
        self._queued_bytes = 0
        self._queued_gen = 0
        self._written_gen = 0
        self._wakeup = anyio.Event()
        self._progress = anyio.Event()
        self._closed = False
        self._pre_flush: list[Callable[[], None]] = []
        self._failed_logs: set[LogFile] = set()
        self.stdout_broken = anyio.Event()
        self._broken_flag = False
        self.log_error: str | None = None
        self.frames_written = 0

    # -- producers (sync, event-loop thread) -------------------------------

    def send(self, frame: bytes) -> None:
        """Queue one stdout frame."""
        self._queue.append((_STDOUT, frame))
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
        while True:
            if not self._queue:
                if self._closed:
                    return
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                continue
            for hook in self._pre_flush:
                hook()
            batch, self._queue = self._queue, []
            gen = self._queued_gen
            self._queued_bytes = 0
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._write_batch, batch)
            self._written_gen = gen
            if self._broken_flag and not self.stdout_broken.is_set():
                self.stdout_broken.set()
            self._progress.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def flush_now(self) -> None:
        """Write the queue synchronously (last resort at shutdown)."""
        for hook in self._pre_flush:
            hook()
        batch, self._queue = self._queue, []
        self._queued_bytes = 0
        self._write_batch(batch)
        self._written_gen = self._queued_gen

    # -- worker thread -----------------------------------------------------

    def _write_batch(self, batch: list[tuple[LogFile | None, bytes]]) -> None:
        run_target: LogFile | None = batch[0][0]
        run: list[bytes] = []
        for target, data in batch:
            if target is not run_target or data is _FSYNC:
                self._write_run(run_target, run)
                run = []
                run_target = target
                if data is _FSYNC and target is not None:
                    self._fsync(target)
                    continue
            run.append(data)
        self._write_run(run_target, run)
        for log in list(self._failed_logs):
            self._write_run(log, [])

    def _write_run(self, target: LogFile | None, run: list[bytes]) -> None:
        if target is None:
            if not run:
                return
            if not self._broken_flag:
                self._write_stdout(b"".join(run) if len(run) > 1 else run[0])
                self.frames_written += len(run)
            return
        try:
            target.write(b"".join(run))
        except OSError as exc:
            self.log_error = f"cannot write {target.path}: {exc.strerror or exc}"
            self._failed_logs.add(target)
        else:
            if target in self._failed_logs:
                self._failed_logs.discard(target)
                self.log_error = None

    def _write_stdout(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._stdout_fd, view)
                view = view[n:]
        except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
            self._mark_broken()

    def _mark_broken(self) -> None:
        # Called from the worker thread: anyio.Event.set is not thread-safe,
        # so run() turns this flag into the stdout_broken event on the loop.
        self._broken_flag = True

    def _fsync(self, log: LogFile) -> None:
        try:
            log.fsync()
        except OSError as exc:
            self.log_error = f"cannot fsync {log.path}: {exc.strerror or exc}"
