"""Backpressure both ways: an editor that does not read holds the bridge back.

An editor that writes without reading cannot make the bridge grow without bound,
and what waits for a slow editor ahead of the answer to a Stop stays small.

Each junk line costs two bytes in and a 166-byte error frame out.  An
editor that never reads stdout would, without input backpressure, make the
bridge read on and keep every answer in memory.  The bridge must stop reading
stdin while too much output waits, so the editor's writes block; once the
editor reads, everything is answered and the process exits cleanly.
"""

from __future__ import annotations

import fcntl
import os
import queue
import select
import time
from pathlib import Path

import orjson
from harness import EXAMPLES
from sync_bridge import Bridge

from acp_bridge.transport.outbox import HIGH_WATER, STDOUT_PIPE_SIZE

LINE = b"x\n"
# Far more input than a bridge that pauses reading accepts: its pause bound
# (1 MiB of output, about 13 KB of these lines), one read (256 KiB) and the
# stdin pipe (64 KiB).
UNBOUNDED = 2 * 1024 * 1024


def test_stdin_is_not_read_while_output_waits_for_the_editor(tmp_path: Path) -> None:
    bridge = Bridge("--state-dir", str(tmp_path / "state"), read_stdout=False)
    assert bridge.proc.stdin is not None
    fd = bridge.proc.stdin.fileno()
    os.set_blocking(fd, False)
    block = LINE * 4096
    accepted = 0
    quiet_since = time.monotonic()
    while accepted < UNBOUNDED:
        _, writable, _ = select.select([], [fd], [], 0.1)
        if writable:
            try:
                accepted += os.write(fd, block)
                quiet_since = time.monotonic()
                continue
            except BlockingIOError:
                pass
        if time.monotonic() - quiet_since > 3:
            break  # the bridge stopped reading
    assert accepted < UNBOUNDED, "the bridge kept reading while nobody read its answers"
    assert accepted % len(LINE) == 0
    lines = accepted // len(LINE)

    # The editor reads again: the bridge resumes and answers every line.
    bridge.start_reading()
    os.set_blocking(fd, True)
    for _ in range(lines):
        frame = bridge.frames.get(timeout=60)
        assert frame is not None
        assert frame["error"]["code"] == -32700
    assert bridge.finish() == 0


def test_few_bytes_wait_ahead_of_the_answer_to_a_stop(tmp_path: Path) -> None:
    """What sits in the stdout pipe and the writer's queue is read before the
    answer to a Stop: the bridge bounds both (a small pipe, a high-water mark),
    so an editor that reads at its own pace gets its answer after a few dozen
    chunks, not after a whole default pipe of them."""
    bridge = Bridge(
        "--script", str(EXAMPLES / "endless.json"), "--state-dir", str(tmp_path / "state")
    )
    assert bridge.proc.stdout is not None
    session = bridge.start_session(str(tmp_path))
    prompt = bridge.prompt_nowait(session, "go")
    first = bridge.wait_for_update()
    frame_size = len(orjson.dumps(first)) + 1
    # The editor is busy: it reads nothing while the bridge streams on, then
    # presses Stop.  (It sees everything queued; how long it was busy only
    # decides whether the pipe had time to fill.)
    bridge.pause_reading()
    time.sleep(0.5)
    while True:  # what was read before the pause took effect was seen before the Stop
        try:
            assert bridge.frames.get_nowait() is not None
        except queue.Empty:
            break
    bridge.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
    bridge.resume_reading()
    ahead = 0
    while True:
        frame = bridge.frames.get(timeout=60)
        assert frame is not None
        if frame.get("id") == prompt:
            assert frame["result"]["stopReason"] == "cancelled"
            break
        ahead += 1
    if hasattr(fcntl, "F_GETPIPE_SZ"):
        assert fcntl.fcntl(bridge.proc.stdout.fileno(), fcntl.F_GETPIPE_SZ) == STDOUT_PIPE_SIZE
    # The pipe, the queue up to the high-water mark, and the batch in flight.
    bound = (STDOUT_PIPE_SIZE + 2 * HIGH_WATER) // frame_size + 10
    assert ahead <= bound, f"{ahead} chunks were ahead of the answer to a Stop (bound {bound})"
    assert bridge.finish() == 0
