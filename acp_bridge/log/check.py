"""Checkers for the model history and for the log's structure (invariant I3).

`check_history` (`acp_bridge.log.history_rules`) states the rules every
provider enforces on a conversation, independently of how the history was
made.  `check_log` states the rules the agent loop follows when it writes a
log, and then checks the history derived from it.  Tests call both after
every turn; neither is used on the hot path.

Both accept every *prefix* of a valid log: a rule that needs a later record
(a ``tool/result`` for a ``tool/call``, a ``stream/end`` for a
``stream/start``) is enforced only when the step or turn that must contain it
ends.  A turn ended with ``forced: true`` was abandoned at the cancel
deadline, so its open steps, streams and tool calls are not required to close.

Why this module is over 400 lines: `_LogChecker` is one state machine, one
handler per record type, and every structural rule of the log lives in it so
that a rule and its exceptions are read in one place; what is open in a turn
is asked of `acp_bridge.log.open_turn.OpenTurn`, the history's own rules are
in `acp_bridge.log.history_rules`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .derive import TEXT_TYPES, derive_messages, is_visible_text, join_parts, visible_blocks
from .history_rules import HistoryInvalid, check_history
from .open_turn import OpenStream, OpenTurn
from .records import (
    COMPACTION_STATUSES,
    RECORD_TYPES,
    SESSION_SETTING_TYPES,
    STREAM_OUTCOMES,
)

__all__ = ["HistoryInvalid", "LogInvalid", "check_history", "check_log"]

Record = Mapping[str, Any]

# How a turn with an interrupted message ends: a user stop, or a crash whose
# delivered prefix was recovered (acp_bridge.log.reopen).
_STOP_REASONS: Final = frozenset({"cancelled", "crashed"})


class LogInvalid(Exception):
    """A log breaks a structural rule; ``seq`` is the record at fault."""

    def __init__(self, reason: str, seq: int | None) -> None:
        super().__init__(reason if seq is None else f"record {seq}: {reason}")
        self.reason = reason
        self.seq = seq


# -- the log ------------------------------------------------------------------


def check_log(records: Sequence[Mapping[str, Any]]) -> None:
    """Raise `LogInvalid` unless ``records`` follow the log's structural rules,
    then `HistoryInvalid` unless the derived history passes `check_history`.

    The rules, besides a contiguous ``seq`` and known record types:

    * ``session/start`` is turn 0 and can only be the first record; other
      records belong to turn n >= 1, which starts with ``turn/start`` (turn
      numbers are contiguous) once turn n - 1 has ended, and nothing of a
      turn comes after its ``turn/end`` (invariant I6).  A log recovered
      after a crash must close the dangling turn (a ``turn/end`` with
      ``forced: true``) before the next ``turn/start``;
    * ``user/message`` and ``turn/end`` are turn-level (step 0); at most one
      ``user/message`` per turn, before the first step;
    * steps are numbered 1, 2, ... and do not overlap; every step-level record
      lies between its ``step/start`` and ``step/end``; a step ends only when
      its streams have ended and its tool calls have results; a turn ends
      (unless forced) only when no step is open;
    * a stream's attempt id is unique; deltas, ``stream/end``, and the
      attempt's one ``assistant/message`` or ``assistant/attempt`` belong to
      its step; ``committed`` streams have a message, ``abandoned`` ones none;
    * a ``tool/call`` id is unique and was announced by a ``tool_call`` block
      of an assistant message of its step; a ``tool/result`` answers an
      earlier ``tool/call`` of its step, once;
    * a ``compaction`` is turn-level and comes between steps: an
      ``in_progress`` record (its id and attempt id unique in the log), then,
      before the next step or the turn's end (unless forced), one outcome for
      the same id; a ``completed`` one has a visible summary, a ``kept_from``
      no later than itself, and ``pinned`` seqs of earlier user or assistant
      messages before ``kept_from``;
    * a ``usage/update`` is step-level, or turn-level between steps;
    * an interrupted ``assistant/message`` holds exactly the non-blank text
      and reasoning of its ``stream`` (invariant I2), the attempt's deltas
      are prefixes of that stream, and the records of the turn after it are
      exactly: its ``stream/end`` (committed), ``step/end`` (cancelled) and
      ``turn/end`` (cancelled), or ``crashed`` for both when the message was
      recovered after the process died.
    """
    checker = _LogChecker()
    for index, record in enumerate(records):
        checker.check(record, index)
    check_history(derive_messages(records))


@dataclass
class _Turn:
    number: int
    # What of the turn is open: the fold the recorder and reopen share, fed
    # each record once the record's rules have passed.
    shape: OpenTurn
    user_messages: int = 0
    # The open step's tool/call ids (answered once not in shape.unanswered)
    # and tool call ids announced by its assistant messages.
    calls: set[str] = field(default_factory=set)
    announced: set[str] = field(default_factory=set)
    # Tool calls shown to the editor (tool/announce) in this turn; those
    # still without a final status are in shape.open_tools.
    shown: set[str] = field(default_factory=set)
    # After an interrupted message: the records the turn must end with.
    expect: list[tuple[str, object]] = field(default_factory=list)
    expect_since: int = 0
    # The compaction in progress (its id), if any.
    compaction: str | None = None

    @property
    def ended(self) -> bool:
        return self.shape.ended

    @property
    def open_step(self) -> int:
        """The open step's number, 0 when no step is open."""
        return self.shape.step if self.shape.step_open else 0

    @property
    def last_step(self) -> int:
        return self.shape.step


class _LogChecker:
    """A record-at-a-time state machine; every rule is checked when its record arrives."""

    def __init__(self) -> None:
        self.turn: _Turn | None = None
        # Ids that must be unique in the whole log.
        self.attempt_ids: set[str] = set()
        self.call_ids: set[str] = set()
        self.announced_ids: set[str] = set()
        self.shown_ids: set[str] = set()
        self.compaction_ids: set[str] = set()
        # The seqs of user and assistant messages (what a compaction may pin).
        self.message_seqs: set[int] = set()
        self.seq = 0
        self.handlers: dict[str, Callable[[Record], None]] = {
            "turn/start": self._turn_start,
            "user/message": self._user_message,
            "turn/end": self._turn_end,
            "step/start": self._step_start,
            "step/end": self._step_end,
            "stream/start": self._stream_start,
            "stream/delta": self._stream_delta,
            "stream/end": self._stream_end,
            "assistant/message": self._assistant_message,
            "assistant/attempt": self._assistant_attempt,
            "agent/request-error": self._request_error,
            "tool/call": self._tool_call,
            "tool/result": self._tool_result,
            "tool/announce": self._tool_announce,
            "tool/update": self._tool_update,
            "usage/update": self._usage_update,
            "agent/internal-error": self._internal_error,
            "compaction": self._compaction,
            "command/answer": self._command_answer,
        }

    def fail(self, reason: str) -> LogInvalid:
        return LogInvalid(reason, self.seq)

    def check(self, record: Record, index: int) -> None:
        self.seq = index
        self._check_envelope(record, index)
        kind = record["type"]
        if record["turn"] == 0 or kind == "session/start":
            self._session_record(record, index)
            return
        if kind != "turn/start":
            self._check_current_turn(record)
        self.handlers[kind](record)
        assert self.turn is not None  # every handler checked it
        self.turn.shape.feed(record)

    def _check_envelope(self, record: Record, index: int) -> None:
        if not isinstance(record, Mapping):
            raise self.fail("a record must be an object")
        if record.get("seq") != index or type(record.get("seq")) is not int:
            raise self.fail(f"seq is {record.get('seq')!r}, expected {index}")
        if record.get("type") not in RECORD_TYPES:
            raise self.fail(f"unknown record type {record.get('type')!r}")
        for name in ("turn", "step"):
            value = record.get(name)
            if type(value) is not int or value < 0:
                raise self.fail(f"{name} must be a non-negative integer, not {value!r}")

    def _session_record(self, record: Record, index: int) -> None:
        if record["type"] in SESSION_SETTING_TYPES and not record["turn"] and not record["step"]:
            if index == 0:
                raise self.fail("session/start must be the first record")
            return
        if record["type"] != "session/start" or record["turn"] or record["step"]:
            where = f"turn {record['turn']} step {record['step']}"
            raise self.fail(f"a {record['type']} record cannot be in {where}")
        if index != 0:
            raise self.fail("session/start must be the first record")

    def _check_current_turn(self, record: Record) -> None:
        turn = self.turn
        if turn is None or record["turn"] != turn.number:
            current = "no turn" if turn is None else f"turn {turn.number}"
            raise self.fail(f"a record of turn {record['turn']} while {current} is current")
        if turn.ended:
            raise self.fail(f"a {record['type']} record after turn {turn.number} ended")
        if turn.expect:
            self._check_expected(turn, record)

    # -- turns and steps --------------------------------------------------------

    def _current(self) -> _Turn:
        assert self.turn is not None  # guaranteed by _check_current_turn
        return self.turn

    def _turn_start(self, record: Record) -> None:
        previous = self.turn
        if previous is not None and not previous.ended:
            raise self.fail(f"turn/start before turn {previous.number} ended")
        expected = 1 if previous is None else previous.number + 1
        if record["turn"] != expected or record["step"] != 0:
            raise self.fail(
                f"turn/start for turn {record['turn']} step {record['step']}, "
                f"expected turn {expected} step 0"
            )
        self.turn = _Turn(expected, OpenTurn(turn=expected))

    def _user_message(self, record: Record) -> None:
        turn = self._turn_level(record)
        if turn.last_step or turn.user_messages:
            raise self.fail("a turn has one user/message, before its first step")
        turn.user_messages += 1
        self.message_seqs.add(self.seq)

    def _turn_end(self, record: Record) -> None:
        turn = self._turn_level(record)
        if record.get("forced") is not True:
            if turn.open_step:
                raise self.fail(f"turn/end while step {turn.open_step} is open")
            if turn.compaction is not None:
                raise self.fail(f"turn/end while compaction {turn.compaction!r} is in progress")
            for call_id in turn.shape.open_tools:
                raise self.fail(f"turn/end before the final tool/update of {call_id!r}")

    def _turn_level(self, record: Record) -> _Turn:
        if record["step"] != 0:
            raise self.fail(f"{record['type']} is a turn-level record (step 0)")
        return self._current()

    def _step_start(self, record: Record) -> None:
        turn = self._current()
        if turn.open_step:
            raise self.fail(f"step/start while step {turn.open_step} is open")
        if turn.compaction is not None:
            raise self.fail(f"step/start while compaction {turn.compaction!r} is in progress")
        if record["step"] != turn.last_step + 1:
            raise self.fail(f"step/start for step {record['step']}, expected {turn.last_step + 1}")
        turn.calls, turn.announced = set(), set()

    def _step_end(self, record: Record) -> None:
        turn = self._in_step(record)
        for attempt, stream in turn.shape.streams.items():
            if not stream.ended:
                raise self.fail(f"step/end before the stream/end of attempt {attempt!r}")
            if stream.outcome == "committed" and stream.surface != "assistant/message":
                raise self.fail(f"attempt {attempt!r} is committed but has no assistant/message")
        for call_id in turn.shape.unanswered:
            raise self.fail(f"step/end before the tool/result of tool call {call_id!r}")

    def _in_step(self, record: Record) -> _Turn:
        turn = self._current()
        if not turn.open_step or record["step"] != turn.open_step:
            open_step = turn.open_step or "none"
            raise self.fail(
                f"a {record['type']} record for step {record['step']}, "
                f"but the open step is {open_step}"
            )
        return turn

    # -- streams ----------------------------------------------------------------

    def _stream_start(self, record: Record) -> None:
        self._in_step(record)
        attempt = record.get("attempt")
        if not isinstance(attempt, str) or not attempt:
            raise self.fail("stream/start needs a non-empty attempt id")
        if attempt in self.attempt_ids:
            raise self.fail(f"attempt id {attempt!r} is used twice")
        self.attempt_ids.add(attempt)

    def _stream_of(self, record: Record) -> OpenStream:
        """The stream of a step-level record's attempt, started in this step."""
        streams = self._in_step(record).shape.streams
        stream = streams.get(record.get("attempt"))  # type: ignore[arg-type]
        if stream is None:
            raise self.fail(
                f"{record['type']} for attempt {record.get('attempt')!r}, "
                "which was not started in this step"
            )
        return stream

    def _stream_delta(self, record: Record) -> None:
        if self._stream_of(record).ended:
            raise self.fail("stream/delta after its stream/end")

    def _stream_end(self, record: Record) -> None:
        stream = self._stream_of(record)
        if stream.ended:
            raise self.fail(f"a second stream/end for attempt {record['attempt']!r}")
        outcome = record.get("outcome")
        if outcome not in STREAM_OUTCOMES:
            raise self.fail(f"unknown stream outcome {outcome!r}")
        if outcome == "abandoned" and stream.surface == "assistant/message":
            raise self.fail("an attempt with an assistant/message cannot be abandoned")

    def _claim_stream(self, record: Record) -> OpenStream:
        stream = self._stream_of(record)
        if stream.surface is not None:
            raise self.fail(f"attempt {record['attempt']!r} already has a {stream.surface}")
        return stream

    def _assistant_message(self, record: Record) -> None:
        stream = self._claim_stream(record)
        self.message_seqs.add(self.seq)
        if stream.outcome == "abandoned":
            raise self.fail("an assistant/message for an abandoned attempt")
        turn = self._current()
        content = record.get("content")
        if not isinstance(content, list):
            raise self.fail("assistant/message content must be a list")
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_call":
                self._announce(turn, block)
        if record.get("interrupted") is True:
            self._interrupted(turn, stream, record)

    def _announce(self, turn: _Turn, block: Mapping[str, Any]) -> None:
        call_id = block.get("id")
        if not isinstance(call_id, str) or call_id in self.announced_ids:
            raise self.fail(f"tool call id {call_id!r} is missing or used twice")
        if not isinstance(block.get("input"), Mapping):
            raise self.fail(f"tool call {call_id!r}: input must be an object")
        self.announced_ids.add(call_id)
        turn.announced.add(call_id)

    def _assistant_attempt(self, record: Record) -> None:
        stream = self._claim_stream(record)
        if stream.outcome == "committed":
            raise self.fail("an assistant/attempt for a committed attempt")

    def _request_error(self, record: Record) -> None:
        self._in_step(record)
        if record.get("retrying") is True:
            retry = record.get("retry_attempt")
            if type(retry) is not int or retry < 1:
                raise self.fail("a retrying agent/request-error needs retry_attempt >= 1")

    def _internal_error(self, record: Record) -> None:
        if record["step"] == 0:
            self._turn_level(record)
        else:
            self._in_step(record)

    def _command_answer(self, record: Record) -> None:
        self._between_steps(record)
        if not isinstance(record.get("text"), str):
            raise self.fail("a command/answer needs its text")

    def _usage_update(self, record: Record) -> None:
        if record["step"] == 0:
            self._between_steps(record)
        else:
            self._in_step(record)
        for name in ("used", "size"):
            value = record.get(name)
            if type(value) is not int or value < 0:
                raise self.fail(f"usage/update {name} must be a non-negative integer")

    def _between_steps(self, record: Record) -> _Turn:
        turn = self._turn_level(record)
        if turn.open_step:
            raise self.fail(f"a turn-level {record['type']} while step {turn.open_step} is open")
        return turn

    # -- compaction ---------------------------------------------------------------

    def _compaction(self, record: Record) -> None:
        turn = self._between_steps(record)
        status = record.get("status")
        compaction_id = record.get("compaction_id")
        if status not in COMPACTION_STATUSES:
            raise self.fail(f"unknown compaction status {status!r}")
        if not isinstance(compaction_id, str) or not compaction_id:
            raise self.fail("a compaction needs a non-empty compaction_id")
        if status == "in_progress":
            if turn.compaction is not None:
                raise self.fail(f"compaction {turn.compaction!r} is already in progress")
            attempt = record.get("attempt")
            if compaction_id in self.compaction_ids:
                raise self.fail(f"compaction id {compaction_id!r} is used twice")
            if not isinstance(attempt, str) or not attempt or attempt in self.attempt_ids:
                raise self.fail(f"compaction attempt id {attempt!r} is missing or used twice")
            self.compaction_ids.add(compaction_id)
            self.attempt_ids.add(attempt)
            turn.compaction = compaction_id
            return
        if turn.compaction != compaction_id:
            raise self.fail(f"a compaction outcome for {compaction_id!r}, which is not in progress")
        turn.compaction = None
        if status == "completed":
            self._completed_compaction(record)

    def _completed_compaction(self, record: Record) -> None:
        if not is_visible_text(record.get("summary")):
            raise self.fail("a completed compaction needs a summary")
        kept_from = record.get("kept_from")
        if type(kept_from) is not int or not 0 <= kept_from <= self.seq:
            raise self.fail(f"kept_from {kept_from!r} is not the seq of an earlier record")
        pinned = record.get("pinned")
        if not isinstance(pinned, list):
            raise self.fail("a completed compaction needs its pinned list")
        for seq in pinned:
            if type(seq) is not int or seq >= kept_from or seq not in self.message_seqs:
                raise self.fail(f"pinned {seq!r} is not a message before kept_from")

    # -- what the editor was shown about tool calls -------------------------------

    def _tool_announce(self, record: Record) -> None:
        turn = self._in_step(record)
        call_id, _ = self._tool_update_fields(record)
        if call_id in self.shown_ids:
            raise self.fail(f"tool call {call_id!r} is announced twice")
        self.shown_ids.add(call_id)
        turn.shown.add(call_id)

    def _tool_update(self, record: Record) -> None:
        turn = self._in_step(record)
        call_id, _ = self._tool_update_fields(record)
        if call_id not in turn.shown:
            raise self.fail(f"tool/update for {call_id!r}, not announced in this turn")
        if call_id not in turn.shape.open_tools:
            raise self.fail(f"tool/update for {call_id!r} after its final status")

    def _tool_update_fields(self, record: Record) -> tuple[str, Mapping[str, Any]]:
        call_id = record.get("tool_call_id")
        update = record.get("update")
        if not isinstance(call_id, str) or not call_id:
            raise self.fail(f"{record['type']} needs a non-empty tool_call_id")
        if not isinstance(update, Mapping) or update.get("toolCallId") != call_id:
            raise self.fail(f"{record['type']}: update must be an object for {call_id!r}")
        return call_id, update

    # -- an interrupted message (invariant I2) -------------------------------------

    def _interrupted(self, turn: _Turn, stream: OpenStream, record: Record) -> None:
        if stream.ended:
            raise self.fail("an interrupted assistant/message after its stream/end")
        # The timed stream the message was built from: its attempt's deltas,
        # or (a log of an older writer) the copy it embeds, which must then
        # hold every delta.
        deltas = join_parts(stream.parts)
        delivered = deltas
        if "stream" in record:
            embedded = _timed_stream_text(record["stream"])
            if embedded is None:
                raise self.fail("the timed stream of an interrupted assistant/message is malformed")
            delivered = embedded
            for key, text in deltas.items():
                if key[1] in TEXT_TYPES and not delivered.get(key, "").startswith(text):
                    raise self.fail(
                        f"stream/delta text of block {key} is not in the message's stream"
                    )
        if record["content"] != visible_blocks(delivered):
            raise self.fail(
                "an interrupted message must hold exactly the non-blank text "
                "and reasoning of its stream, in stream order"
            )
        turn.expect = [
            ("stream/end", record["attempt"]),
            ("step/end", turn.open_step),
            ("turn/end", turn.number),
        ]
        turn.expect_since = self.seq

    def _check_expected(self, turn: _Turn, record: Record) -> None:
        kind, key = turn.expect[0]
        forced_end = record["type"] == "turn/end" and record.get("forced") is True
        if forced_end and record.get("reason") in _STOP_REASONS:
            turn.expect = []
            return
        if record["type"] != kind or not _matches_expected(record, key):
            raise self.fail(
                f"after the interrupted message (record {turn.expect_since}) expected "
                f"{_describe(kind, key)}, found {_describe(record['type'], record)}"
            )
        turn.expect.pop(0)

    # -- tools ------------------------------------------------------------------

    def _tool_call(self, record: Record) -> None:
        turn = self._in_step(record)
        call_id = record.get("tool_call_id")
        if not isinstance(call_id, str) or call_id in self.call_ids:
            raise self.fail(f"tool/call id {call_id!r} is missing or used twice")
        if call_id not in turn.announced:
            raise self.fail(
                f"tool/call {call_id!r} was not called by an assistant message of this step"
            )
        self.call_ids.add(call_id)
        turn.calls.add(call_id)

    def _tool_result(self, record: Record) -> None:
        turn = self._in_step(record)
        call_id = record.get("tool_call_id")
        if call_id not in turn.calls:
            raise self.fail(f"tool/result for {call_id!r}, which has no tool/call in this step")
        if call_id not in turn.shape.unanswered:
            raise self.fail(f"a second tool/result for {call_id!r}")


def _matches_expected(record: Record, key: object) -> bool:
    kind = record["type"]
    if kind == "stream/end":
        return record.get("attempt") == key and record.get("outcome") == "committed"
    if kind == "step/end":
        return record["step"] == key and record.get("reason") in _STOP_REASONS
    return record.get("reason") in _STOP_REASONS


def _describe(kind: str, key: object) -> str:
    """Name an expected record (``key`` is its attempt or step) or a found one."""
    if isinstance(key, Mapping):
        detail = key.get("outcome", key.get("reason"))
        return kind if detail is None else f"{kind} ({detail})"
    if kind == "stream/end":
        return f"the stream/end (committed) of attempt {key!r}"
    return f"{kind} (cancelled)"


def _timed_stream_text(stream: object) -> dict[tuple[int, str], str] | None:
    """Concatenate a timed stream ``[[t_ms, index, kind, text], ...]`` per block."""
    if not isinstance(stream, list) or not all(
        isinstance(entry, list) and len(entry) == 4 for entry in stream
    ):
        return None
    return join_parts(stream)
