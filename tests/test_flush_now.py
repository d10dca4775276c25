"""`Outbox.flush_now` while the writer waits for a full stdout.

The answer to a Stop is written by the task that read the cancel.  When the
writer task is waiting for stdout to take the rest of its batch and the
editor has meanwhile read the pipe empty, `flush_now` writes that rest and
then the answer at once, in order, its log records first, without a trip
through the event loop.  When stdout is still full it writes nothing ahead of
the rest: the answer goes out behind it.

A real pipe, read without blocking; no timing is asserted.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from support.harness import read_available

from acp_bridge.log.writer import SessionLog
from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio

ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{"stopReason":"cancelled"}}\n'


async def frame_bigger_than_the_pipe(write_end: int) -> tuple[bytes, int]:
    """A frame the pipe cannot hold at once, and the pipe's size."""
    # The writer makes stdout non-blocking and shrinks the pipe when it
    # starts: size the frame on what the pipe holds then.
    while os.get_blocking(write_end):
        await anyio.lowlevel.checkpoint()
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    size = fcntl.fcntl(write_end, get_size) if get_size is not None else 64 * 1024
    frame = b'{"chunk":"' + b"x" * (size + 1500) + b'"}\n'
    return frame, size


async def until_the_writer_took_it(outbox: Outbox) -> None:
    """The writer took the queue and wrote what the pipe holds (it writes
    without yielding until stdout would block): it now waits for stdout."""
    while outbox.backlog:
        await anyio.lowlevel.checkpoint()


async def test_flush_now_writes_the_rest_then_the_answer_once_the_pipe_has_room(
    tmp_path: Path,
) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    slog = SessionLog(str(tmp_path / "s.jsonl"), outbox)
    got = b""
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        frame, size = await frame_bigger_than_the_pipe(write_end)
        outbox.send(frame)
        await until_the_writer_took_it(outbox)
        got += read_available(read_end)
        assert len(got) == size  # the writer's rest waits for room
        # The editor has read the pipe empty; the writer has not run since.
        slog.append("turn/end", 1, 0, reason="cancelled", forced=False)
        outbox.send(ANSWER)
        outbox.flush_now()
        # No checkpoint: what is in the pipe now was written by flush_now.
        got += read_available(read_end)
        assert got == frame + ANSWER, "the answer waited for the writer task"
        assert b'"turn/end"' in (tmp_path / "s.jsonl").read_bytes()
        await outbox.drain()
        outbox.close()
    os.close(write_end)
    os.close(read_end)


async def test_flush_now_writes_nothing_ahead_of_a_rest_stdout_has_not_taken(
    tmp_path: Path,
) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    slog = SessionLog(str(tmp_path / "s.jsonl"), outbox)
    got = b""
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        frame, size = await frame_bigger_than_the_pipe(write_end)
        outbox.send(frame + frame)
        await until_the_writer_took_it(outbox)
        got += read_available(read_end)  # one pipeful; a rest longer than the pipe waits
        slog.append("turn/end", 1, 0, reason="cancelled", forced=False)
        outbox.send(ANSWER)
        outbox.flush_now()  # writes one more pipeful of the rest, not the answer
        got += read_available(read_end)
        assert len(got) == 2 * size
        assert ANSWER not in got
        while not got.endswith(ANSWER):
            await anyio.lowlevel.checkpoint()
            got += read_available(read_end)
        assert got == frame + frame + ANSWER
        await outbox.drain()
        outbox.close()
    os.close(write_end)
    os.close(read_end)
