"""The live Stop closes a turn as a crash does, but for the reason.

The in-process recorder (`acp_bridge.loop.recorder.TurnRecorder`) over a real
`SessionLog` is driven through a random turn (steps, streams with text and
reasoning fed to a real `StreamAssembler`, tool calls announced, dispatched,
answered or not), cut at a random point; then the live ending
(`acp_bridge.loop.ending.record_stop`) closes it, as a user stop or as a
disconnect.  What it appended must be what crash recovery
(`acp_bridge.log.reopen.closing_records`) appends to the same prefix, but for
the reason and its words; a disconnect must be exactly the fold's own
``close("disconnected")``, and every log must pass the log's rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from test_open_turn_property import _appended, _but_for_the_reason, _unmarked

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reopen import closing_records, last_turn
from acp_bridge.log.writer import RecordWriter, SessionLog
from acp_bridge.loop.ending import Closing, record_stop
from acp_bridge.loop.lifecycle import TurnKind
from acp_bridge.loop.recorder import TurnRecorder
from acp_bridge.loop.stream import StepStream
from acp_bridge.providers.base import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

Record = dict[str, Any]

WORDS = st.text(alphabet="ab \n", max_size=4)  # often blank, sometimes empty


class MemoryWriter:
    """A `RecordWriter` that keeps the log's bytes in memory."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.hooks: list[Callable[[], None]] = []

    def open_log(self, path: str, *, create: bool = True) -> object:
        return path

    def write_log(self, log: object, data: bytes) -> None:
        self.data += data

    def fsync_log(self, log: object) -> None:
        pass

    def add_pre_flush(self, hook: Callable[[], None]) -> None:
        self.hooks.append(hook)

    def remove_pre_flush(self, hook: Callable[[], None]) -> None:
        if hook in self.hooks:
            self.hooks.remove(hook)

    def retract(self, prefixes: tuple[bytes, ...], count: int) -> bool:
        return False  # nothing is queued: every chunk was delivered

    def records(self) -> list[Record]:
        return [orjson.loads(line) for line in bytes(self.data).splitlines()]


@dataclass
class StubSession:
    outbox: MemoryWriter


@dataclass
class StubTurn:
    """What `record_stop` reads of a turn (`acp_bridge.loop.ending.Closing`)."""

    rec: TurnRecorder
    session: StubSession
    cause: str
    stream: StepStream | None = None
    open_compaction: None = None
    stop_reason: str | None = None
    error: None = None
    number: int = 1
    left_out: bool = False
    overflow_why: str = ""
    shown: list[dict[str, Any]] = field(default_factory=list)

    def show_tool(self, update: dict[str, Any]) -> None:
        fields = {key: value for key, value in update.items() if key != "sessionUpdate"}
        if update["sessionUpdate"] == "tool_call":
            self.rec.tool_announce(fields)
        else:
            self.rec.tool_update(fields)
        self.shown.append(update)

    def abort_undispatched(self) -> None:
        pass


def _stream(turn: StubTurn, data: st.DataObject, number: int) -> list[str] | None:
    """Start a stream and deliver random chunks; the ids of the tool calls it
    asks for, or None if the turn is cut in it."""
    rec = turn.rec
    stream = turn.stream = StepStream()
    rec.stream_start(stream.attempt, stream.message_id, "scripted")
    for index in range(data.draw(st.integers(0, 2))):
        kind = data.draw(st.sampled_from(["text", "reasoning"]))
        for text in data.draw(st.lists(WORDS, min_size=1, max_size=3)):
            event = TextDelta(index, text) if kind == "text" else ReasoningDelta(index, text)
            stream.asm.feed(event)
            rec.delta(index, kind, text)
        if data.draw(st.booleans()):
            rec.log.flush_delta()  # a delta record is written
    if data.draw(st.booleans()):
        # Cut: every chunk delivered has its delta record (invariant I4).
        rec.log.flush_delta()
        return None
    ids = [f"call_{number}_{n}" for n in range(data.draw(st.integers(0, 2)))]
    for n, call_id in enumerate(ids):
        stream.asm.feed(ToolCallStart(10 + n, call_id, "read_file"))
        stream.asm.feed(ToolCallDelta(10 + n, '{"path": "a"}'))
    stream.asm.feed(Finish("tool_use"))
    blocks = stream.asm.blocks()
    if blocks:
        rec.message(blocks, finish="tool_use", usage=None)
    else:
        rec.attempt("empty", blocks)
    turn.stream = None
    return ids


def _tools(turn: StubTurn, data: st.DataObject, ids: list[str]) -> None:
    rec = turn.rec
    for call_id in ids:
        turn.show_tool({"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "read"})
        if data.draw(st.booleans()):
            continue  # shown, never dispatched
        rec.tool_call(call_id, "read_file", {"path": "a"}, "dispatched")
        if data.draw(st.booleans()):
            continue  # dispatched, no result yet
        rec.tool_result(call_id, [{"type": "text", "text": "ok"}], is_error=False)
        if data.draw(st.booleans()):
            update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
            turn.show_tool({**update, "status": "completed"})


def _drive(turn: StubTurn, data: st.DataObject) -> None:
    """A random turn of the live recorder, left open at a random point."""
    rec = turn.rec
    rec.turn_start()
    for number in range(data.draw(st.integers(1, 3))):
        rec.step_start()
        ids = _stream(turn, data, number)
        if ids is None:
            return
        _tools(turn, data, ids)
        if ids:
            return  # cut while the tools run (a step that ran tools is the last)
        if data.draw(st.booleans()):
            return  # cut between steps
        rec.step_end("tool_use")


def _timeless(record: Record) -> Record:
    """A record without its seq and time."""
    return {key: value for key, value in record.items() if key not in ("seq", "at")}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(["user", "disconnected"]))
def test_the_live_stop_closes_a_turn_as_a_crash_does(data: st.DataObject, cause: str) -> None:
    writer = MemoryWriter()
    slog = SessionLog("memory.jsonl", cast(RecordWriter, writer))
    slog.append("session/start", 0, 0, session_id="sess_live", cwd="/project", provider="scripted")
    turn = StubTurn(
        TurnRecorder(slog, 1, TurnKind.prompt([{"type": "text", "text": "hi"}])),
        StubSession(writer),
        cause,
    )
    _drive(turn, data)
    prefix = writer.records()

    record_stop(cast(Closing, turn), forced=True)
    stopped = writer.records()
    check_log(stopped)
    assert turn.stop_reason == "cancelled"
    assert turn.rec.closed
    assert not turn.rec.open_tools
    assert not turn.rec.unanswered
    closed_in_memory = _appended(prefix, last_turn(prefix).close("disconnected"))
    crashed = _appended(prefix, closing_records(prefix))
    check_log(crashed)
    if cause == "disconnected":
        assert stopped[-1]["reason"] == "disconnected"
        assert [_timeless(r) for r in stopped] == [_timeless(r) for r in closed_in_memory]
        return
    assert stopped[-1]["reason"] == "cancelled"
    assert [_timeless(_but_for_the_reason(r)) for r in stopped] == [
        _timeless(_but_for_the_reason(r)) for r in crashed
    ]
    assert _unmarked(derive_messages(stopped)) == _unmarked(derive_messages(crashed))
