"""An editor that writes without reading cannot make the bridge grow without bound.

Each junk line costs two bytes in and a 166-byte error frame out.  An
editor that never reads stdout would, without input backpressure, make the
bridge read on and keep every answer in memory.  The bridge must stop reading
stdin while too much output waits, so the editor's writes block; once the
editor reads, everything is answered and the process exits cleanly.
"""

from __future__ import annotations

import os
import select
import time
from pathlib import Path

from sync_bridge import Bridge

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
