"""Little in flight for an editor that reads slowly: chunk frames merged, the pipe kept short.

What the editor still has to read when it presses Stop is read before the
answer, so the writer (a) merges the consecutive chunk frames of a big batch
into one frame with the same text, and (b) writes a new batch only while the
pipe holds no more than `IN_FLIGHT`, unless the editor has read nothing for
`STALL` (then the pipe fills as before).  Through the real subprocess, the
texts the editor read still equal the interrupted message (test_backpressure).
"""

from __future__ import annotations

import os

import anyio
import orjson
import pytest

from acp_bridge.protocol.frames import CHUNK_SUFFIX, UpdateFrames
from acp_bridge.transport import pipe as pipe_module
from acp_bridge.transport.merge import MERGE_ABOVE, MERGE_TEXT_MAX, merge_chunk_frames
from acp_bridge.transport.outbox import Outbox
from acp_bridge.transport.pipe import IN_FLIGHT, StdoutPipe

FRAMES = UpdateFrames("sess_1")
TEXT = FRAMES.chunk_prefix("agent_message_chunk", "msg_1")
THOUGHT = FRAMES.chunk_prefix("agent_thought_chunk", "msg_1")
SUFFIXES = {TEXT: CHUNK_SUFFIX, THOUGHT: CHUNK_SUFFIX}

pytestmark = pytest.mark.anyio


def chunk(prefix: bytes, text: str) -> bytes:
    return prefix + orjson.dumps(text) + CHUNK_SUFFIX


def texts(frames: list[bytes]) -> list[tuple[str, str]]:
    """(kind, text) of each chunk frame, (other, frame) for the rest."""
    out = []
    for frame in frames:
        update = orjson.loads(frame)["params"]["update"] if frame.startswith(TEXT[:20]) else None
        if update is None:
            out.append(("other", frame.decode()))
        else:
            out.append((update["sessionUpdate"], update["content"]["text"]))
    return out


def test_runs_of_chunks_merge_into_one_frame_with_their_texts_joined() -> None:
    other = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    frames = [
        chunk(TEXT, "a"),
        chunk(TEXT, 'b "quoted" \\ \n\u2028é'),
        chunk(TEXT, "c"),
        other,
        chunk(TEXT, "d"),
        chunk(THOUGHT, "e"),
        chunk(THOUGHT, "f"),
        chunk(TEXT, "g"),
    ]
    merged = merge_chunk_frames(frames, SUFFIXES, (TEXT, THOUGHT))
    assert texts(merged) == [
        ("agent_message_chunk", 'ab "quoted" \\ \n\u2028éc'),
        ("other", other.decode()),
        ("agent_message_chunk", "d"),
        ("agent_thought_chunk", "ef"),
        ("agent_message_chunk", "g"),
    ]
    assert all(frame.endswith(b"\n") and frame.count(b"\n") == 1 for frame in merged)


def test_frames_of_a_prefix_not_registered_stay_as_they_are() -> None:
    frames = [chunk(TEXT, "a"), chunk(TEXT, "b")]
    assert merge_chunk_frames(frames, {THOUGHT: CHUNK_SUFFIX}, (THOUGHT,)) == frames


def test_big_chunks_keep_their_own_frames() -> None:
    big = "x" * MERGE_TEXT_MAX
    frames = [chunk(TEXT, "a"), chunk(TEXT, big), chunk(TEXT, "b"), chunk(TEXT, "c")]
    merged = merge_chunk_frames(frames, SUFFIXES, (TEXT, THOUGHT))
    assert texts(merged) == [
        ("agent_message_chunk", "a"),
        ("agent_message_chunk", big),
        ("agent_message_chunk", "bc"),
    ]


async def test_a_big_batch_reaches_the_pipe_merged_and_a_small_one_as_queued() -> None:
    read_end, write_end = os.pipe()
    outbox = Outbox(write_end)
    outbox.merge_chunks((TEXT,), CHUNK_SUFFIX)
    small = [chunk(TEXT, "x"), chunk(TEXT, "y")]
    big = [chunk(TEXT, "tok ") for _ in range(MERGE_ABOVE // len(small[0]) + 2)]
    try:
        for frame in small:
            outbox.send(frame)
        outbox.flush_now()
        for frame in big:
            outbox.send(frame)
        outbox.flush_now()
        data = os.read(read_end, 1 << 16)
    finally:
        os.close(read_end)
        os.close(write_end)
    lines = data.splitlines(keepends=True)
    assert texts(lines) == [
        ("agent_message_chunk", "x"),
        ("agent_message_chunk", "y"),
        ("agent_message_chunk", "tok " * len(big)),
    ]


class FakePipe(StdoutPipe):
    """A pipe whose unread bytes the test sets."""

    def __init__(self) -> None:
        super().__init__(-1)
        self.unread_bytes = 0

    def unread(self) -> int:
        return self.unread_bytes


async def test_no_new_batch_while_more_than_the_bound_is_unread() -> None:
    pipe = FakePipe()
    pipe.unread_bytes = IN_FLIGHT
    assert not pipe.over_in_flight()
    pipe.unread_bytes = IN_FLIGHT + 1
    assert pipe.over_in_flight()
    pipe.unread_bytes = IN_FLIGHT + 100  # more written meanwhile, nothing read
    assert pipe.over_in_flight()
    pipe.unread_bytes = IN_FLIGHT + 50  # the editor reads: still over
    assert pipe.over_in_flight()
    pipe.unread_bytes = 10
    assert not pipe.over_in_flight()


async def test_an_editor_that_reads_nothing_gets_a_full_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipe = FakePipe()
    monkeypatch.setattr(pipe_module, "STALL", 0.0)
    pipe.unread_bytes = IN_FLIGHT + 1
    assert not pipe.over_in_flight()


async def test_the_writer_holds_the_next_batch_while_the_pipe_is_over_the_bound() -> None:
    """Through a real pipe: with more than the bound unread, what is queued
    stays queued (retractable) until the editor reads; then it goes out."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    first = b"x" * (IN_FLIGHT + 100) + b"\n"
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.send(first)
            with anyio.fail_after(10):
                await outbox.drain()
            outbox.send(b"next\n")
            # A barrier: the writer has looked at the queue at least once more
            # (it wakes every few milliseconds while it waits for the editor).
            with anyio.fail_after(10):
                while outbox._pipe._stalled_from is None:  # noqa: ASYNC110
                    await anyio.sleep(0.001)
            assert outbox.backlog == len(b"next\n")  # still queued: not in flight
            got = b""
            with anyio.fail_after(10):
                while not got.endswith(b"next\n"):
                    try:
                        got += os.read(read_end, 1 << 16)
                    except BlockingIOError:
                        await anyio.sleep(0.001)
            assert got == first + b"next\n"
            outbox.close()
    finally:
        os.close(read_end)
        os.close(write_end)
