"""Logged before delivered: a batch's log records reach the file before its frames.

The real ordered writer, a real file and a real pipe for stdout.  At the very
moment each log write happens, the pipe is read: none of the frames the
records describe may be in it yet.  A writer that put the frames of a batch
ahead of its records (the order a crash could turn into delivered text that
no record holds, or an answer with no ``turn/end`` behind it) fails here
every time, with no crash needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from acp_bridge.log.writer import SessionLog
from acp_bridge.log.writer.files import LogFile
from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio


class WatchedFile(LogFile):
    """A log file that, before each write, reads what stdout already carries."""

    def __init__(self, path: str, stdout_read: int, seen: list[tuple[bytes, bytes]]) -> None:
        super().__init__(path)
        self._stdout_read = stdout_read
        self._seen = seen

    def write(self, data: bytes) -> None:
        try:
            on_stdout = os.read(self._stdout_read, 1 << 20)
        except BlockingIOError:
            on_stdout = b""
        self._seen.append((bytes(data), on_stdout))
        super().write(data)


class WatchedOutbox(Outbox):
    def __init__(self, stdout_write: int, stdout_read: int) -> None:
        super().__init__(stdout_write)
        self.seen: list[tuple[bytes, bytes]] = []
        self._stdout_read = stdout_read

    def open_log(self, path: str, *, create: bool = True) -> LogFile:
        return WatchedFile(path, self._stdout_read, self.seen)


@pytest.mark.parametrize("answer_with_flush_now", [False, True])
async def test_records_reach_the_file_before_the_frames_they_describe(
    tmp_path: Path, answer_with_flush_now: bool
) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = WatchedOutbox(write_end, read_end)
    slog = SessionLog(str(tmp_path / "s.jsonl"), outbox)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        slog.append("turn/start", 1, 0)
        slog.open_stream("att_1", 1, 1, "fake")
        for word in ("alpha", "beta", "gamma"):
            outbox.send(b'{"chunk":"' + word.encode() + b'"}\n')
            slog.delta(0, "text", word)
            await outbox.drain()
        outbox.send(b'{"chunk":"delta"}\n')
        slog.delta(0, "text", "delta")
        slog.close_stream("committed")
        slog.append("turn/end", 1, 0, reason="end_turn", forced=False)
        outbox.send(b'{"answer":"end_turn"}\n')
        if answer_with_flush_now:
            outbox.flush_now()
        await outbox.drain()
        outbox.close()
    os.close(write_end)
    os.close(read_end)

    delivered = b""
    for data, on_stdout in outbox.seen:
        delivered += on_stdout
        for chunk in (b"alpha", b"beta", b"gamma", b"delta"):
            if chunk in data:
                assert chunk not in delivered, f"{chunk!r} reached stdout before its record"
        if b'"turn/end"' in data:
            assert b"answer" not in delivered, "answered before the turn/end was written"
    assert sum(1 for data, _ in outbox.seen if b"stream/delta" in data) >= 3


async def test_a_nudge_records_a_stream_no_editor_sees(tmp_path: Path) -> None:
    """A hidden subagent's chunks go to no editor: a nudge of the writer (in
    place of the frame) still writes their delta record while the stream is
    open, with nothing else queued to wake it."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    path = tmp_path / "s.jsonl"
    slog = SessionLog(str(path), outbox)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        slog.append("turn/start", 1, 0)
        slog.open_stream("att_1", 1, 1, "fake")
        await outbox.drain()
        slog.delta(0, "text", "unseen words")
        outbox.nudge()
        with anyio.fail_after(5):
            # A file has no event to wait on.
            while b"unseen words" not in path.read_bytes():  # noqa: ASYNC110
                await anyio.sleep(0.01)
        with pytest.raises(BlockingIOError):
            os.read(read_end, 1 << 16)  # nothing reached stdout
        outbox.close()
    os.close(write_end)
    os.close(read_end)
