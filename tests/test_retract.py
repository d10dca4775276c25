"""A Stop takes back the chunks the writer has not taken yet.

The editor gets what the writer took before the Stop (it is in the pipe, or
in the batch stdout has not accepted yet) and nothing else; the interrupted
message and the log's delta records hold exactly that (invariant I2).  Chunks
already covered by a record of the session stay: they are delivered.

In process, with the outbox's writer not running: the test plays the writer
(`Outbox.flush_now` takes and writes the queue), so what is taken when is
exact.  The same rule through the subprocess is in test_backpressure.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream
from support.harness import read_available, wait_until

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import SessionLog
from acp_bridge.loop.session import Session
from acp_bridge.loop.turn import Turn, TurnConfig, TurnKind
from acp_bridge.protocol.frames import UpdateFrames
from acp_bridge.providers.base import (
    ModelRequest,
    Provider,
    ProviderStream,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Usage,
)
from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio


class FedProvider(Provider):
    """Streams the events the test sends, one at a time."""

    name = "fed"

    def __init__(self, events: MemoryObjectReceiveStream[StreamEvent]) -> None:
        self._events = events

    def stream(self, request: ModelRequest) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Fed]:
        yield _Fed(self._events)


class _Fed(ProviderStream):
    def __init__(self, events: MemoryObjectReceiveStream[StreamEvent]) -> None:
        self._events = events

    def __aiter__(self) -> _Fed:
        return self

    async def __anext__(self) -> StreamEvent:
        return await self._events.receive()

    def abort(self) -> bool:
        return True


Play = Callable[[Callable[[StreamEvent], Awaitable[None]], Outbox, SessionLog], Awaitable[None]]


async def stop_after(play: Play, tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """Run one turn, let ``play`` feed it events and take batches, press Stop;
    return the text of the chunks the editor got and the session's records."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        outbox = Outbox(write_end, pipe_size=0)  # its writer task never runs
        slog = SessionLog(str(tmp_path / "s.jsonl"), outbox)
        send, receive = anyio.create_memory_object_stream[StreamEvent]()
        frames = UpdateFrames("sess_1")
        session = Session("sess_1", str(tmp_path), slog, FedProvider(receive), outbox, frames)
        async with send, receive, anyio.create_task_group() as tg:
            turn = Turn(
                session,
                1,
                TurnKind.prompt([{"type": "text", "text": "Go"}]),
                TurnConfig(idle_timeout=None),
                tg.start_soon,
            )
            tg.start_soon(turn.run)

            async def feed(event: StreamEvent) -> None:
                before = len(outbox._queue)
                await send.send(event)
                await wait_until(lambda: len(outbox._queue) > before)

            await wait_until(lambda: turn.stream is not None)
            await play(feed, outbox, slog)
            turn.cancel("user")
            assert turn.settled.is_set()  # the stop ended the turn at once
            outbox.write_log_now(slog.file)
            outbox.flush_now()  # the answer's batch: whatever is still queued
            tg.cancel_scope.cancel()
        got = read_available(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    text = ""
    for line in got.splitlines():
        update = orjson.loads(line)["params"]["update"]
        if update["sessionUpdate"] == "agent_message_chunk":
            text += update["content"]["text"]
    return text, read_records(tmp_path / "s.jsonl")


def interrupted_text(records: list[dict[str, Any]]) -> str | None:
    messages = [r for r in records if r["type"] == "assistant/message"]
    if not messages:
        return None
    (message,) = messages
    assert message["interrupted"] is True
    return "".join(block["text"] for block in message["content"])


def delta_text(records: list[dict[str, Any]]) -> str:
    return "".join(
        text
        for r in records
        if r["type"] == "stream/delta"
        for _, kind, text in r["parts"]
        if kind == "text"
    )


async def test_chunks_the_writer_has_not_taken_are_taken_back(tmp_path: Path) -> None:
    async def play(feed: Callable[[StreamEvent], Awaitable[None]], outbox: Outbox, _: Any) -> None:
        for piece in ("One ", "two "):
            await feed(TextDelta(0, piece))
        outbox.flush_now()  # the writer takes these two
        for piece in ("three ", "four "):
            await feed(TextDelta(0, piece))

    seen, records = await stop_after(play, tmp_path)
    assert seen == "One two "
    assert interrupted_text(records) == seen
    assert delta_text(records) == seen
    check_log(records)
    assert derive_messages(records)[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "One two "}],
        "interrupted": True,
    }


async def test_a_stop_before_the_writer_took_anything_leaves_no_message(tmp_path: Path) -> None:
    async def play(feed: Callable[[StreamEvent], Awaitable[None]], *_: Any) -> None:
        for piece in ("Never ", "shown"):
            await feed(TextDelta(0, piece))

    seen, records = await stop_after(play, tmp_path)
    assert seen == ""
    assert interrupted_text(records) is None
    (attempt,) = [r for r in records if r["type"] == "assistant/attempt"]
    assert attempt["outcome"] == "empty"
    assert delta_text(records) == ""
    check_log(records)


async def test_chunks_another_record_covers_stay_and_are_delivered(tmp_path: Path) -> None:
    """A usage/update record writes the pending delta record first: the chunks
    before it are in the log, so they must reach the editor even though the
    writer had not taken them; only the chunks after it are taken back."""

    async def play(feed: Callable[[StreamEvent], Awaitable[None]], outbox: Outbox, _: Any) -> None:
        await feed(TextDelta(0, "Taken. "))
        outbox.flush_now()
        await feed(TextDelta(0, "Recorded. "))
        await feed(Usage(input_tokens=10, output_tokens=5, context_window=1000))
        await feed(TextDelta(0, "Queued."))

    seen, records = await stop_after(play, tmp_path)
    assert seen == "Taken. Recorded. "
    assert interrupted_text(records) == seen
    assert delta_text(records) == seen
    assert [r["type"] for r in records].count("usage/update") == 1
    check_log(records)


async def test_blocks_streamed_at_once_are_each_taken_back(tmp_path: Path) -> None:
    """Text and reasoning interleaved (two blocks open at once)."""

    async def play(feed: Callable[[StreamEvent], Awaitable[None]], outbox: Outbox, _: Any) -> None:
        await feed(TextDelta(0, "Seen. "))
        await feed(ReasoningDelta(1, "Thought. "))
        outbox.flush_now()
        for event in (TextDelta(0, "a"), ReasoningDelta(1, "b"), TextDelta(0, "c")):
            await feed(event)

    seen, records = await stop_after(play, tmp_path)
    assert seen == "Seen. "
    (message,) = [r for r in records if r["type"] == "assistant/message"]
    assert message["content"] == [
        {"type": "text", "text": "Seen. "},
        {"type": "reasoning", "text": "Thought. "},
    ]
    check_log(records)


async def test_the_outbox_takes_back_all_or_nothing_and_only_what_is_queued(
    tmp_path: Path,
) -> None:
    read_end, write_end = os.pipe()
    try:
        outbox = Outbox(write_end, pipe_size=0)
        outbox.send(b"A1\n")
        outbox.flush_now()  # taken and written: no longer the queue's
        for frame in (b"B1\n", b"A2\n", b"C3\n"):
            outbox.send(frame)
        assert outbox.backlog == 9
        assert outbox.retract((b"A",), 3) is False  # only one A frame is queued
        assert outbox.retract((b"A", b"C"), 3) is False  # B1 is not theirs
        assert outbox.retract((b"A", b"C"), 2) is True
        assert outbox.backlog == 3
        outbox.flush_now()
        assert os.read(read_end, 100) == b"A1\nB1\n"
        outbox.send(b"A4\n")
        outbox.write_log(outbox.open_log(str(tmp_path / "s.jsonl")), b"{}\n")
        assert outbox.retract((b"A",), 1) is False  # a log record is queued last
        outbox.flush_now()
        assert os.read(read_end, 100) == b"A4\n"
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_draining_ends_when_the_rest_of_the_queue_was_taken_back() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        outbox = Outbox(write_end, pipe_size=0)
        async with anyio.create_task_group() as tg:
            outbox.send(b"A1\n")
            assert outbox.retract((b"A",), 1) is True
            tg.start_soon(outbox.run)
            with anyio.fail_after(5):
                await outbox.drain()
            outbox.close()
        assert read_available(read_end) == b""
    finally:
        os.close(read_end)
        os.close(write_end)
