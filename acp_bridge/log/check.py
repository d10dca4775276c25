"""Checkers for the model history and for the log's structure (invariant I3).

`check_history` states the rules every provider enforces on a conversation,
independently of how the history was made.  `check_log` states the rules the
agent loop follows when it writes a log, and then checks the history derived
from it.  Tests call both after every turn; neither is used on the hot path.

Both accept every *prefix* of a valid log: a rule that needs a later record
(a ``tool/result`` for a ``tool/call``, a ``stream/end`` for a
``stream/start``) is enforced only when the step or turn that must contain it
ends.  A turn ended with ``forced: true`` was abandoned at the cancel
deadline, so its open steps, streams and tool calls are not required to close.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .derive import (
    ASSISTANT_BLOCK_TYPES,
    USER_BLOCK_TYPES,
    derive_messages,
    is_visible_text,
    join_parts,
    visible_blocks,
)
from .records import (
    COMPACTION_STATUSES,
    FINAL_TOOL_STATUSES,
    RECORD_TYPES,
    SESSION_SETTING_TYPES,
)

__all__ = ["HistoryInvalid", "LogInvalid", "check_history", "check_log"]

Record = Mapping[str, Any]

_ROLE_BLOCK_TYPES: Final = {"user": USER_BLOCK_TYPES, "assistant": ASSISTANT_BLOCK_TYPES}
_TEXT_TYPES: Final = frozenset({"text", "reasoning"})
# How a turn with an interrupted message ends: a user stop, or a crash whose
# delivered prefix was recovered (acp_bridge.log.reopen).
_STOP_REASONS: Final = frozenset({"cancelled", "crashed"})


class HistoryInvalid(Exception):
    """A model history breaks a provider rule; ``index`` is the message at fault."""

    def __init__(self, reason: str, index: int | None) -> None:
        super().__init__(reason if index is None else f"message {index}: {reason}")
        self.reason = reason
        self.index = index


class LogInvalid(Exception):
    """A log breaks a structural rule; ``seq`` is the record at fault."""

    def __init__(self, reason: str, seq: int | None) -> None:
        super().__init__(reason if seq is None else f"record {seq}: {reason}")
        self.reason = reason
        self.seq = seq


# -- the model history --------------------------------------------------------


def check_history(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raise `HistoryInvalid` unless ``messages`` is a history a provider accepts.

    The rules: the history is empty or starts with a user message; roles
    alternate; no message is empty; text and reasoning blocks are not blank;
    each role holds only its block types; tool call ids are unique and inputs
    are objects; every tool call has exactly one result in the next message,
    which must exist; every tool result answers a call of the message just
    before it, and tool results come before the other blocks of their message.
    """
    used_ids: set[str] = set()
    for index, message in enumerate(messages):
        _check_message_shape(message, index)
        _check_role_order(messages, index)
        if message["role"] == "assistant":
            _check_tool_calls(messages, index, used_ids)
        else:
            _check_tool_results(messages, index)


def _check_message_shape(message: Mapping[str, Any], index: int) -> None:
    if not isinstance(message, Mapping):
        raise HistoryInvalid("a message must be an object", index)
    role = message.get("role")
    if role not in _ROLE_BLOCK_TYPES:
        raise HistoryInvalid(f"role must be 'user' or 'assistant', not {role!r}", index)
    interrupted = message.get("interrupted")
    if not isinstance(interrupted, bool):
        raise HistoryInvalid("'interrupted' must be a boolean", index)
    if interrupted and role == "user":
        raise HistoryInvalid("a user message cannot be interrupted", index)
    crashed = message.get("crashed", False)
    if crashed is not False and (crashed is not True or not interrupted):
        raise HistoryInvalid("'crashed' may only be true, on an interrupted message", index)
    content = message.get("content")
    if not isinstance(content, list) or not content:
        raise HistoryInvalid("empty message: content must be a non-empty list", index)
    for position, block in enumerate(content):
        _check_block(block, _ROLE_BLOCK_TYPES[role], f"{role} block {position}", index)


def _check_block(block: object, allowed: frozenset[str], where: str, index: int) -> None:
    if not isinstance(block, Mapping) or block.get("type") not in allowed:
        kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
        raise HistoryInvalid(f"{where}: a block of type {kind!r} is not allowed here", index)
    if block["type"] in _TEXT_TYPES and not is_visible_text(block.get("text")):
        raise HistoryInvalid(f"{where}: empty or whitespace-only {block['type']} block", index)


def _check_role_order(messages: Sequence[Mapping[str, Any]], index: int) -> None:
    role = messages[index]["role"]
    if index == 0 and role != "user":
        raise HistoryInvalid("the history must start with a user message", index)
    if index > 0 and messages[index - 1]["role"] == role:
        raise HistoryInvalid(f"two {role} messages in a row", index)


def _check_tool_calls(messages: Sequence[Mapping[str, Any]], index: int, used: set[str]) -> None:
    calls = [block for block in messages[index]["content"] if block["type"] == "tool_call"]
    for call in calls:
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise HistoryInvalid("a tool call needs a non-empty string id", index)
        if not isinstance(call.get("name"), str) or not call["name"]:
            raise HistoryInvalid(f"tool call {call_id!r} needs a non-empty name", index)
        if not isinstance(call.get("input"), Mapping):
            raise HistoryInvalid(f"tool call {call_id!r}: input must be an object", index)
        if call_id in used:
            raise HistoryInvalid(f"tool call id {call_id!r} is used twice", index)
        used.add(call_id)
    if not calls:
        return
    if index + 1 == len(messages):
        raise HistoryInvalid("the history ends with tool calls that have no results", index)
    following = messages[index + 1]
    content = following.get("content") if isinstance(following, Mapping) else None
    answers = [
        block.get("tool_call_id")
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, Mapping) and block.get("type") == "tool_result"
    ]
    for call in calls:
        count = answers.count(call["id"])
        if count != 1:
            raise HistoryInvalid(
                f"tool call {call['id']!r} has {count} results in the next message, "
                "expected exactly one",
                index,
            )


def _check_tool_results(messages: Sequence[Mapping[str, Any]], index: int) -> None:
    previous = messages[index - 1] if index > 0 else None
    called = set()
    if previous is not None and previous["role"] == "assistant":
        called = {block["id"] for block in previous["content"] if block["type"] == "tool_call"}
    seen_other = False
    for block in messages[index]["content"]:
        if block["type"] != "tool_result":
            seen_other = True
            continue
        if seen_other:
            raise HistoryInvalid("tool results must come before the other blocks", index)
        _check_tool_result_shape(block, index)
        if block["tool_call_id"] not in called:
            raise HistoryInvalid(
                f"tool result for {block['tool_call_id']!r} answers no tool call "
                "of the assistant message just before it",
                index,
            )


def _check_tool_result_shape(block: Mapping[str, Any], index: int) -> None:
    call_id = block.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise HistoryInvalid("a tool result needs a non-empty string tool_call_id", index)
    if not isinstance(block.get("is_error"), bool):
        raise HistoryInvalid(f"tool result for {call_id!r}: is_error must be a boolean", index)
    content = block.get("content")
    if not isinstance(content, list):
        raise HistoryInvalid(f"tool result for {call_id!r}: content must be a list", index)
    allowed = USER_BLOCK_TYPES - {"tool_result"}
    for position, inner in enumerate(content):
        _check_block(inner, allowed, f"tool result {call_id!r} block {position}", index)


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
    ended: bool = False
    open_step: int = 0  # 0 when no step is open
    last_step: int = 0
    user_messages: int = 0
    # The open step's streams, tool calls, and tool call ids announced by
    # its assistant messages.
    streams: dict[str, _Stream] = field(default_factory=dict)
    calls: dict[str, _Call] = field(default_factory=dict)
    announced: set[str] = field(default_factory=set)
    # Tool calls shown to the editor (tool/announce) in this turn, and
    # whether each has had its final status (completed or failed).
    shown: dict[str, bool] = field(default_factory=dict)
    # After an interrupted message: the records the turn must end with.
    expect: list[tuple[str, object]] = field(default_factory=list)
    expect_since: int = 0
    # The compaction in progress (its id), if any.
    compaction: str | None = None


@dataclass
class _Stream:
    open: bool = True
    outcome: str | None = None
    surface: str | None = None  # the assistant/* record type written for it
    delivered: dict[tuple[int, str], str] = field(default_factory=dict)


@dataclass
class _Call:
    answered: bool = False


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
        self.turn = _Turn(expected)

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
            for call_id, final in turn.shown.items():
                if not final:
                    raise self.fail(f"turn/end before the final tool/update of {call_id!r}")
        turn.ended = True

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
        turn.open_step = turn.last_step = record["step"]
        turn.streams, turn.calls, turn.announced = {}, {}, set()

    def _step_end(self, record: Record) -> None:
        turn = self._in_step(record)
        for attempt, stream in turn.streams.items():
            if stream.open:
                raise self.fail(f"step/end before the stream/end of attempt {attempt!r}")
            if stream.outcome == "committed" and stream.surface != "assistant/message":
                raise self.fail(f"attempt {attempt!r} is committed but has no assistant/message")
        for call_id, call in turn.calls.items():
            if not call.answered:
                raise self.fail(f"step/end before the tool/result of tool call {call_id!r}")
        turn.open_step = 0

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
        turn = self._in_step(record)
        attempt = record.get("attempt")
        if not isinstance(attempt, str) or not attempt:
            raise self.fail("stream/start needs a non-empty attempt id")
        if attempt in self.attempt_ids:
            raise self.fail(f"attempt id {attempt!r} is used twice")
        self.attempt_ids.add(attempt)
        turn.streams[attempt] = _Stream()

    def _stream_of(self, record: Record) -> _Stream:
        """The stream of a step-level record's attempt, started in this step."""
        stream = self._in_step(record).streams.get(record.get("attempt"))  # type: ignore[arg-type]
        if stream is None:
            raise self.fail(
                f"{record['type']} for attempt {record.get('attempt')!r}, "
                "which was not started in this step"
            )
        return stream

    def _stream_delta(self, record: Record) -> None:
        stream = self._stream_of(record)
        if not stream.open:
            raise self.fail("stream/delta after its stream/end")
        for index, kind, text in record.get("parts", ()):
            key = (index, kind)
            stream.delivered[key] = stream.delivered.get(key, "") + text

    def _stream_end(self, record: Record) -> None:
        stream = self._stream_of(record)
        if not stream.open:
            raise self.fail(f"a second stream/end for attempt {record['attempt']!r}")
        outcome = record.get("outcome")
        if outcome not in ("committed", "abandoned"):
            raise self.fail(f"unknown stream outcome {outcome!r}")
        if outcome == "abandoned" and stream.surface == "assistant/message":
            raise self.fail("an attempt with an assistant/message cannot be abandoned")
        stream.open, stream.outcome = False, outcome

    def _claim_stream(self, record: Record) -> _Stream:
        stream = self._stream_of(record)
        if stream.surface is not None:
            raise self.fail(f"attempt {record['attempt']!r} already has a {stream.surface}")
        stream.surface = record["type"]
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
        call_id, update = self._tool_update_fields(record)
        if call_id in self.shown_ids:
            raise self.fail(f"tool call {call_id!r} is announced twice")
        self.shown_ids.add(call_id)
        turn.shown[call_id] = update.get("status") in FINAL_TOOL_STATUSES

    def _tool_update(self, record: Record) -> None:
        turn = self._in_step(record)
        call_id, update = self._tool_update_fields(record)
        final = turn.shown.get(call_id)
        if final is None:
            raise self.fail(f"tool/update for {call_id!r}, not announced in this turn")
        if final:
            raise self.fail(f"tool/update for {call_id!r} after its final status")
        turn.shown[call_id] = update.get("status") in FINAL_TOOL_STATUSES

    def _tool_update_fields(self, record: Record) -> tuple[str, Mapping[str, Any]]:
        call_id = record.get("tool_call_id")
        update = record.get("update")
        if not isinstance(call_id, str) or not call_id:
            raise self.fail(f"{record['type']} needs a non-empty tool_call_id")
        if not isinstance(update, Mapping) or update.get("toolCallId") != call_id:
            raise self.fail(f"{record['type']}: update must be an object for {call_id!r}")
        return call_id, update

    # -- an interrupted message (invariant I2) -------------------------------------

    def _interrupted(self, turn: _Turn, stream: _Stream, record: Record) -> None:
        if not stream.open:
            raise self.fail("an interrupted assistant/message after its stream/end")
        delivered = _timed_stream_text(record.get("stream"))
        if delivered is None:
            raise self.fail("an interrupted assistant/message needs its timed stream")
        if record["content"] != visible_blocks(delivered):
            raise self.fail(
                "an interrupted message must hold exactly the non-blank text "
                "and reasoning of its stream, in stream order"
            )
        for key, text in stream.delivered.items():
            if key[1] in _TEXT_TYPES and not delivered.get(key, "").startswith(text):
                raise self.fail(f"stream/delta text of block {key} is not in the message's stream")
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
        turn.calls[call_id] = _Call()

    def _tool_result(self, record: Record) -> None:
        call = self._in_step(record).calls.get(record.get("tool_call_id"))  # type: ignore[arg-type]
        if call is None:
            raise self.fail(
                f"tool/result for {record.get('tool_call_id')!r}, which has no "
                "tool/call in this step"
            )
        if call.answered:
            raise self.fail(f"a second tool/result for {record['tool_call_id']!r}")
        call.answered = True


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
