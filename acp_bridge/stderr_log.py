"""Logging to stderr that never blocks the event loop.

An editor may never read the agent's stderr.  Once the pipe is full (64 KiB on
Linux), a plain `logging.StreamHandler` blocks the thread that logs, which is
the event loop: streaming, cancels and new requests would all stop.  Here:

* `StderrHandler` only appends the formatted line to its own bounded buffer
  (`BUFFER_BYTES`) and returns; a daemon thread writes the buffer to stderr
  whenever stderr takes it.  When the buffer is full a line is dropped and
  counted, and the count is written in its place once stderr drains
  (``acp-bridge: 12 log message(s) dropped: stderr was not being read``).
  A message logged with ``extra={MUST_DELIVER: True}`` (the records a log
  file could not take, at exit) is never dropped for the bound.
* `RepeatFilter` rate-limits repeated messages (the same logger, level and
  message template): a burst of `BURST` goes through, then the first one over
  the limit says so, then one per `INTERVAL` seconds, each saying how many
  were suppressed before it.
  A flood of junk frames costs a few lines, not one per frame.

At exit `logging.shutdown` flushes the handler: it waits as long as stderr
keeps taking what is written (at most `EXIT_FLUSH_LIMIT` seconds), and gives up
after `EXIT_FLUSH_SECONDS` without progress on a stderr that nobody reads.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .redact import SECRETS

__all__ = ["MUST_DELIVER", "RepeatFilter", "StderrHandler", "install"]

BUFFER_BYTES: Final = 256 * 1024
BURST: Final = 10
INTERVAL: Final = 1.0
EXIT_FLUSH_SECONDS: Final = 0.5
EXIT_FLUSH_LIMIT: Final = 10.0
# The `logging` ``extra`` key of a message that must not be dropped.
MUST_DELIVER: Final = "acp_bridge_must_deliver"
FORMAT: Final = "acp-bridge %(levelname)s %(name)s: %(message)s"


@dataclass(slots=True)
class _Dropped:
    count: int = 0

    def render(self) -> bytes:
        return (
            f"acp-bridge: {self.count} log message(s) dropped: stderr was not being read\n"
        ).encode()


class StderrHandler(logging.Handler):
    """A handler whose `emit` never waits for the file descriptor it writes to."""

    def __init__(self, fd: int = 2, *, buffer_bytes: int = BUFFER_BYTES) -> None:
        super().__init__()
        self.fd = fd
        self.buffer_bytes = buffer_bytes
        self.dropped = 0  # lines dropped in total (buffer full or stderr gone)
        self._queue: deque[bytes | _Dropped] = deque()
        self._queued_bytes = 0
        self._writing = False
        self._broken = False
        # When stderr last took bytes (monotonic).
        self._progress_at = 0.0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="stderr-writer", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # Without the process's secrets (`acp_bridge.redact`), traceback included.
            line = (SECRETS.text(self.format(record)) + "\n").encode("utf-8", "replace")
        except Exception:
            self.handleError(record)
            return
        self.enqueue(line, bounded=not getattr(record, MUST_DELIVER, False))

    def enqueue(self, line: bytes, *, bounded: bool = True) -> None:
        """Queue bytes for stderr, or count them as dropped; never blocks.

        ``bounded=False``: queued even beyond the buffer's bound.
        """
        with self._cond:
            if self._broken:
                self.dropped += 1  # stderr is gone: nothing will be written again
                return
            if bounded and self._queued_bytes + len(line) > self.buffer_bytes:
                self.dropped += 1
                last = self._queue[-1] if self._queue else None
                if isinstance(last, _Dropped):
                    last.count += 1
                else:
                    self._queue.append(_Dropped(1))
                    self._cond.notify()  # the count is written once stderr drains
                return
            self._queue.append(line)
            self._queued_bytes += len(line)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                item = self._queue.popleft()
                data = item.render() if isinstance(item, _Dropped) else item
                if not isinstance(item, _Dropped):
                    self._queued_bytes -= len(item)
                self._writing = True
            try:
                self._write_all(data)
            except OSError:
                with self._cond:
                    self._broken = True  # EPIPE, EBADF: nothing more will get through
                    self._queue.clear()
                    self._queued_bytes = 0
            finally:
                with self._cond:
                    self._writing = False
                    self._cond.notify_all()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                # stderr may be non-blocking (a flag shared with whoever else
                # holds the pipe): wait here, in this thread, until it drains.
                select.select([], [self.fd], [], 1.0)
                continue
            view = view[written:]
            self._progress_at = time.monotonic()

    def flush(
        self, timeout: float = EXIT_FLUSH_SECONDS, *, limit: float = EXIT_FLUSH_LIMIT
    ) -> None:
        """Wait until the buffer is written: while stderr takes bytes, for at
        most ``limit`` seconds; ``timeout`` seconds once it takes nothing."""
        start = time.monotonic()
        with self._cond:
            self._progress_at = max(self._progress_at, start)
            while self._queue or self._writing:
                now = time.monotonic()
                left = min(self._progress_at + timeout, start + limit) - now
                if left <= 0:
                    return
                self._cond.wait(min(left, 0.05))


class RepeatFilter(logging.Filter):
    """Let a repeated message through in a burst, then once per ``interval`` seconds."""

    def __init__(
        self,
        burst: int = BURST,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.burst = burst
        self.interval = interval
        self.clock = clock
        # key -> [tokens, last refill time, suppressed since the last one let
        # through, 1.0 once the limit was announced]
        self._state: dict[tuple[str, int, str], list[float]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        note = ""
        with self._lock:
            state = self._state.get(key)
            if state is None:
                if len(self._state) > 10_000:
                    self._state.clear()  # bounded memory for endlessly varied messages
                state = self._state[key] = [float(self.burst), now, 0.0, 0.0]
            tokens = min(self.burst, state[0] + (now - state[1]) / self.interval)
            state[0], state[1] = tokens, now
            if tokens >= self.burst:
                state[3] = 0.0  # quiet long enough: a new flood is announced again
            if tokens >= 1:
                state[0] -= 1
                if state[2]:
                    note = f" ({int(state[2])} similar message(s) suppressed)"
                state[2] = 0.0
            elif not state[3]:
                # The first one over the limit says so, so that a reader knows
                # more happened even if nothing of this kind comes later.
                state[3] = 1.0
                note = f" (repeated; now at most one every {self.interval:g}s)"
            else:
                state[2] += 1
                return False
        if note:
            record.msg = f"{record.msg}{note}"
        return True


def install(level: int) -> StderrHandler:
    """Route the root logger to a non-blocking, rate-limited stderr handler."""
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(RepeatFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
