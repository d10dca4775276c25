"""The history checker, the log checker, and whole logs at every cut (invariant I3).

`LogBuilder` writes records in the order the agent loop writes them (see
acp_bridge/log/records/); every record it writes is checked against the
JSON Schema.  The realistic log and the random logs of the property test are
built with it.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.harness import EVENT_LOG_SCHEMA, EVENT_LOG_VALIDATOR

from acp_bridge.log import check as check_module
from acp_bridge.log.check import HistoryInvalid, LogInvalid, check_history, check_log
from acp_bridge.log.derive import delivered_prefix, derive_messages
from acp_bridge.log.records import RECORD_TYPES

Record = dict[str, Any]
Block = dict[str, Any]
Chunk = tuple[int, str, str]  # (index, kind, text), as delivered to the editor


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def reasoning(value: str) -> Block:
    return {"type": "reasoning", "text": value}


def call(call_id: str, name: str = "read_file", **input: Any) -> Block:
    return {"type": "tool_call", "id": call_id, "name": name, "input": input}


_VALID: set[str] = set()


def _validate(record: Record) -> None:
    """Check a record against the schema (once per distinct content: it is slow)."""
    key = json.dumps({k: v for k, v in record.items() if k not in ("seq", "at")}, sort_keys=True)
    if key not in _VALID:
        errors = [error.message for error in EVENT_LOG_VALIDATOR.iter_errors(record)]
        assert errors == [], (record, errors)
        _VALID.add(key)


def visible_blocks(chunks: Sequence[Chunk]) -> list[Block]:
    """What the assembler keeps of delivered text: non-blank blocks, in stream order."""
    texts: dict[tuple[int, str], str] = {}
    for index, kind, piece in chunks:
        if kind in ("text", "reasoning"):
            texts[(index, kind)] = texts.get((index, kind), "") + piece
    return [{"type": kind, "text": t} for (_, kind), t in texts.items() if t.strip()]


class LogBuilder:
    """Writes a session log the way the agent loop does."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.turn = 0
        self.step = 0
        self._ids = itertools.count(1)
        # Tool calls shown to the editor (tool/announce) without a final update.
        self._shown: set[str] = set()
        self.add("session/start", session_id="sess_test", cwd="/project", provider="scripted")

    def add(self, type: str, **fields: Any) -> Record:
        level_turn = 0 if type == "session/start" else self.turn
        turn_level = type in (
            "session/start",
            "turn/start",
            "user/message",
            "turn/end",
            "compaction",
        )
        record = {
            "v": 1,
            "seq": len(self.records),
            "at": 1_700_000_000.0 + len(self.records) / 100,
            "type": type,
            "turn": level_turn,
            "step": 0 if turn_level else self.step,
            **fields,
        }
        _validate(record)
        self.records.append(record)
        return record

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    # -- turns and steps ---------------------------------------------------------

    def prompt(self, *texts: str) -> None:
        self.turn += 1
        self.step = 0
        self.add("turn/start")
        blocks = [text(t) for t in texts]
        self.add("user/message", content=blocks, prompt=blocks)

    def end_turn(self, reason: str, *, forced: bool = False) -> None:
        self.add("turn/end", reason=reason, forced=forced)

    def start_step(self) -> None:
        self.step += 1
        self.add("step/start")

    def end_step(self, reason: str) -> None:
        self.add("step/end", reason=reason)

    # -- streams -----------------------------------------------------------------

    def stream(self, chunks: Sequence[Chunk]) -> str:
        attempt = self.new_id("att")
        message_id = "msg_" + attempt
        self.add("stream/start", attempt=attempt, provider="scripted", message_id=message_id)
        for start in range(0, len(chunks), 2):  # two chunks per delta record
            parts = [list(chunk) for chunk in chunks[start : start + 2]]
            self.add("stream/delta", attempt=attempt, parts=parts)
        return attempt

    def commit(self, attempt: str, content: list[Block], finish: str) -> None:
        """The end of a finished stream: a message, or an empty attempt."""
        if not content:
            self.abandon(attempt, "empty", [])
            return
        usage = {"input_tokens": 100, "output_tokens": 20}
        self.add(
            "assistant/message",
            attempt=attempt,
            content=content,
            interrupted=False,
            finish=finish,
            usage=usage,
        )
        self.add("stream/end", attempt=attempt, outcome="committed")

    def interrupt(self, attempt: str, chunks: Sequence[Chunk]) -> None:
        """A user stop mid-stream: the delivered prefix, then the cancelled ends."""
        blocks = visible_blocks(chunks)
        if blocks:
            self.add(
                "assistant/message",
                attempt=attempt,
                content=blocks,
                interrupted=True,
                finish=None,
                usage=None,
            )
            self.add("stream/end", attempt=attempt, outcome="committed")
        else:
            self.abandon(attempt, "empty", [])
        self.end_step("cancelled")
        self.end_turn("cancelled")

    def abandon(self, attempt: str, outcome: str, content: list[Block]) -> None:
        self.add("assistant/attempt", attempt=attempt, outcome=outcome, content=content)
        self.add("stream/end", attempt=attempt, outcome="abandoned")

    def request_error(self, attempt: str | None, kind: str = "overloaded") -> None:
        error = {
            "kind": kind,
            "message": "Overloaded",
            "retryable": True,
            "status": 529,
            "request_id": "req_1",
        }
        self.add("agent/request-error", attempt=attempt, error=error)

    def tool(self, block: Block, output: str, *, status: str = "dispatched") -> None:
        self.add(
            "tool/call",
            tool_call_id=block["id"],
            name=block["name"],
            input=block["input"],
            status=status,
        )
        self.add(
            "tool/result",
            tool_call_id=block["id"],
            content=[text(output)],
            is_error=status == "aborted",
        )
        if block["id"] not in self._shown:
            return
        self._shown.discard(block["id"])
        final = "failed" if status == "aborted" else "completed"
        self.add("tool/update", tool_call_id=block["id"], update=tool_update(block, final))

    # -- whole steps ---------------------------------------------------------------

    def reply_step(self, chunks: Sequence[Chunk], finish: str = "end_turn") -> None:
        self.start_step()
        attempt = self.stream(chunks)
        self.add("usage/update", used=120, size=200_000)
        self.commit(attempt, visible_blocks(chunks), finish)
        self.end_step(finish)

    def tool_step(self, chunks: Sequence[Chunk], calls: Sequence[Block]) -> None:
        """A step whose reply asks for tools; their results follow its message."""
        self.start_step()
        attempt = self.stream([*chunks, *self._args_chunks(chunks, calls)])
        for block in calls:
            announce = {**tool_update(block, "pending"), "title": block["name"], "kind": "other"}
            self.add("tool/announce", tool_call_id=block["id"], update=announce)
            self._shown.add(block["id"])
        self.commit(attempt, [*visible_blocks(chunks), *calls], "tool_use")
        for block in calls:
            self.tool(block, f"output of {block['id']}")

    def _args_chunks(self, chunks: Sequence[Chunk], calls: Sequence[Block]) -> list[Chunk]:
        first = 1 + max((index for index, _, _ in chunks), default=-1)
        return [(first + i, "tool_args", json.dumps(c["input"])) for i, c in enumerate(calls)]


def tool_update(block: Block, status: str) -> Record:
    return {"toolCallId": block["id"], "status": status}


def realistic_log() -> list[Record]:
    """A tool round, a cancelled turn, a provider error, then a follow-up."""
    b = LogBuilder()
    b.prompt("What is in notes.txt?")
    b.tool_step(
        [(0, "reasoning", "I should read "), (0, "reasoning", "the file."), (1, "text", " \n")],
        [call("call_1", path="notes.txt")],
    )
    b.end_step("tool_use")
    b.reply_step([(0, "text", "It says: "), (0, "text", "buy milk.")])
    b.end_turn("end_turn")

    b.prompt("Write a poem about it")
    b.start_step()
    chunks = [
        (0, "reasoning", "A short poem"),
        (1, "text", "Milk, "),
        (1, "text", "oh milk,\n"),
        (2, "text", "  "),
        (3, "tool_args", '{"pa'),
    ]
    b.interrupt(b.stream(chunks), chunks)

    b.prompt("Go on")
    b.start_step()
    attempt = b.stream([(0, "text", "Whi")])
    b.abandon(attempt, "provider_error", [text("Whi")])
    b.request_error(attempt)
    b.end_step("provider_error")
    b.end_turn("error")

    b.prompt("Please go on")
    b.reply_step([(0, "text", "White as the moon.")])
    b.end_turn("end_turn")
    return b.records


def user_msg(*blocks: Block) -> Block:
    return {"role": "user", "content": list(blocks), "interrupted": False}


def assistant_msg(*blocks: Block, interrupted: bool = False) -> Block:
    return {"role": "assistant", "content": list(blocks), "interrupted": interrupted}


def tool_result(call_id: str, output: str) -> Block:
    return {
        "type": "tool_result",
        "tool_call_id": call_id,
        "content": [text(output)],
        "is_error": False,
    }


# -- the realistic log ------------------------------------------------------------


def test_schema_names_every_record_type() -> None:
    jsonschema.Draft202012Validator.check_schema(EVENT_LOG_SCHEMA)
    assert set(EVENT_LOG_SCHEMA["properties"]["type"]["enum"]) == RECORD_TYPES
    checked = [rule["if"]["properties"]["type"]["const"] for rule in EVENT_LOG_SCHEMA["allOf"]]
    assert sorted(checked) == sorted(RECORD_TYPES)  # each type has exactly one rule


def test_schema_rejects_what_the_contract_forbids() -> None:
    record = realistic_log()[2]  # user/message
    assert EVENT_LOG_VALIDATOR.is_valid(record)
    assert not EVENT_LOG_VALIDATOR.is_valid({**record, "extra": 1})
    assert not EVENT_LOG_VALIDATOR.is_valid({**record, "step": 1})
    assert not EVENT_LOG_VALIDATOR.is_valid({**record, "v": 2})
    without_content = {key: v for key, v in record.items() if key != "content"}
    assert not EVENT_LOG_VALIDATOR.is_valid(without_content)
    interrupted = next(r for r in realistic_log() if r.get("interrupted") is True)
    assert EVENT_LOG_VALIDATOR.is_valid(interrupted)
    # An older writer's copy of the timed stream: accepted when well formed.
    assert EVENT_LOG_VALIDATOR.is_valid({**interrupted, "stream": [[0, 0, "text", "Milk"]]})
    assert not EVENT_LOG_VALIDATOR.is_valid({**interrupted, "stream": [[0, "text", "Milk"]]})


def _embed_stream(records: list[Record]) -> int:
    """The interrupted message as an older writer wrote it, its attempt's
    deltas repeated in ``stream``; its position."""
    i = interrupted_at(records)
    attempt = records[i]["attempt"]
    records[i]["stream"] = [
        [float(n), *part]
        for n, r in enumerate(records[:i])
        if r["type"] == "stream/delta" and r["attempt"] == attempt
        for part in r["parts"]
    ]
    return i


def test_an_older_log_that_repeats_the_stream_is_still_valid() -> None:
    records = realistic_log()
    _embed_stream(records)
    check_log(records)
    assert derive_messages(records) == derive_messages(realistic_log())


def test_realistic_log_derives_the_expected_history() -> None:
    records = realistic_log()
    check_log(records)
    assert derive_messages(records) == [
        user_msg(text("What is in notes.txt?")),
        assistant_msg(reasoning("I should read the file."), call("call_1", path="notes.txt")),
        user_msg(tool_result("call_1", "output of call_1")),
        assistant_msg(text("It says: buy milk.")),
        user_msg(text("Write a poem about it")),
        assistant_msg(reasoning("A short poem"), text("Milk, oh milk,\n"), interrupted=True),
        user_msg(text("Go on"), text("Please go on")),
        assistant_msg(text("White as the moon.")),
    ]


def test_interrupted_message_is_what_the_deltas_delivered() -> None:
    # Invariant I2, read from the log alone (as crash recovery would).
    records = realistic_log()
    message = next(r for r in records if r.get("interrupted") is True)
    delivered = delivered_prefix(records, message["attempt"])
    assert delivered == {
        (0, "reasoning"): "A short poem",
        (1, "text"): "Milk, oh milk,\n",
        (2, "text"): "  ",
        (3, "tool_args"): '{"pa',
    }
    assert message["content"] == [
        {"type": kind, "text": t}
        for (_, kind), t in delivered.items()
        if kind != "tool_args" and t.strip()
    ]


def test_every_cut_of_the_realistic_log_is_valid() -> None:
    records = realistic_log()
    lengths = set()
    for cut in range(len(records) + 1):
        prefix = records[:cut]
        messages = derive_messages(prefix)
        check_history(messages)
        check_log(prefix)
        lengths.add(len(messages))
    assert lengths == set(range(9))  # the history grows through every length


def test_a_forced_turn_end_may_leave_its_step_open() -> None:
    b = LogBuilder()
    b.prompt("Hang")
    b.start_step()
    b.stream([(0, "text", "stuck")])
    b.end_turn("cancelled", forced=True)
    check_log(b.records)
    assert derive_messages(b.records) == [user_msg(text("Hang"))]
    late = copy.deepcopy(b.records[-2])  # the stuck stream's delta arrives late
    b.prompt("Next")
    check_log(b.records)
    b.records.append({**late, "seq": len(b.records)})
    with pytest.raises(LogInvalid, match="a record of turn 1 while turn 2 is current"):
        check_log(b.records)


def test_check_log_checks_the_derived_history(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = [assistant_msg(text("I speak first"))]
    monkeypatch.setattr(check_module, "derive_messages", lambda records: bad)
    with pytest.raises(HistoryInvalid, match="start with a user message"):
        check_log(realistic_log())


# -- check_history: one rule per case ---------------------------------------------


def valid_history() -> list[Block]:
    return [
        user_msg(text("Q")),
        assistant_msg(reasoning("think"), text("Let me look."), call("c1"), call("c2", n=2)),
        user_msg(tool_result("c1", "one"), tool_result("c2", "two"), text("and also")),
        assistant_msg(text("Done"), interrupted=True),
        user_msg(text("Next")),
    ]


def test_the_valid_history_passes() -> None:
    check_history(valid_history())
    check_history([])
    check_history(valid_history()[:4])


Mutation = Callable[[list[Block]], object]


def _set(index: int, key: str, value: object) -> Mutation:
    return lambda h: h[index].__setitem__(key, value)


def _block(index: int, position: int, **changes: object) -> Mutation:
    return lambda h: h[index]["content"][position].update(changes)


def _result_content(*blocks: object) -> Mutation:
    return lambda h: h[2]["content"][0].__setitem__("content", list(blocks))


HISTORY_RULES: list[tuple[str, Mutation, int, str]] = [
    ("starts with assistant", lambda h: h.pop(0), 0, "start with a user message"),
    (
        "two users in a row",
        lambda h: h.append(user_msg(text("x"))),
        5,
        "two user messages in a row",
    ),
    (
        "two assistants in a row",
        lambda h: h.insert(4, assistant_msg(text("x"))),
        4,
        "two assistant messages in a row",
    ),
    ("unknown role", _set(4, "role", "system"), 4, "role must be 'user' or 'assistant'"),
    (
        "not an object",
        lambda h: h.__setitem__(4, cast(Block, ["x"])),
        4,
        "a message must be an object",
    ),
    ("empty message", _set(4, "content", []), 4, "empty message"),
    ("content not a list", _set(4, "content", "Next"), 4, "empty message"),
    (
        "interrupted missing",
        lambda h: h[4].pop("interrupted"),
        4,
        "'interrupted' must be a boolean",
    ),
    ("interrupted user", _set(4, "interrupted", True), 4, "a user message cannot be interrupted"),
    ("blank text", _block(4, 0, text=" \n"), 4, "whitespace-only text block"),
    ("empty reasoning", _block(1, 0, text=""), 1, "whitespace-only reasoning block"),
    ("text not a string", _block(3, 0, text=None), 3, "whitespace-only text block"),
    (
        "tool call in user",
        lambda h: h[4]["content"].append(call("c9")),
        4,
        "'tool_call' is not allowed",
    ),
    (
        "tool result in assistant",
        lambda h: h[3]["content"].append(tool_result("c1", "x")),
        3,
        "'tool_result' is not allowed",
    ),
    ("unknown block", _block(4, 0, type="audio"), 4, "'audio' is not allowed"),
    ("block not an object", lambda h: h[4]["content"].append("x"), 4, "'str' is not allowed"),
    ("tool call input", _block(1, 2, input="{}"), 1, "input must be an object"),
    ("tool call id", _block(1, 2, id=""), 1, "non-empty string id"),
    ("tool call name", _block(1, 2, name=None), 1, "needs a non-empty name"),
    ("duplicate call id", lambda h: h[1]["content"].append(call("c1")), 1, "'c1' is used twice"),
    ("call id reused later", lambda h: h[3]["content"].append(call("c2")), 3, "'c2' is used twice"),
    ("missing result", lambda h: h[2]["content"].pop(1), 1, "'c2' has 0 results"),
    (
        "two results",
        lambda h: h[2]["content"].insert(1, tool_result("c1", "again")),
        1,
        "'c1' has 2 results",
    ),
    ("trailing tool calls", lambda h: h.__delitem__(slice(2, None)), 1, "ends with tool calls"),
    (
        "calls then assistant",
        lambda h: h.__setitem__(2, assistant_msg(text("x"))),
        1,
        "'c1' has 0 results",
    ),
    (
        "orphan result",
        lambda h: h[4]["content"].insert(0, tool_result("c1", "late")),
        4,
        "answers no tool call",
    ),
    (
        "result first message",
        lambda h: h[0]["content"].insert(0, tool_result("c0", "x")),
        0,
        "answers no tool call",
    ),
    ("result after text", lambda h: h[2]["content"].reverse(), 2, "must come before"),
    ("result is_error", _block(2, 0, is_error="no"), 2, "is_error must be a boolean"),
    ("result content", _block(2, 0, content="one"), 2, "content must be a list"),
    ("result blank text", _result_content(text("  ")), 2, "whitespace-only text block"),
    ("result tool call", _result_content(call("c7")), 2, "'tool_call' is not allowed"),
    ("result call id", _block(2, 0, tool_call_id=7), 1, "'c1' has 0 results"),
]


@pytest.mark.parametrize(
    ("mutate", "index", "reason"),
    [pytest.param(m, i, r, id=name) for name, m, i, r in HISTORY_RULES],
)
def test_check_history_rejects(mutate: Mutation, index: int, reason: str) -> None:
    history = valid_history()
    mutate(history)
    with pytest.raises(HistoryInvalid, match=reason) as caught:
        check_history(history)
    assert caught.value.index == index


def test_check_history_result_needs_a_call_id() -> None:
    history = valid_history()
    history[2]["content"].append(tool_result("", "x"))
    history[2]["content"].sort(key=lambda block: block["type"] != "tool_result")
    with pytest.raises(HistoryInvalid, match="non-empty string tool_call_id"):
        check_history(history)


# -- check_log: one rule per case --------------------------------------------------


def at(records: list[Record], type: str, occurrence: int = 0, **match: Any) -> int:
    """The index of the ``occurrence``-th record of ``type`` with the given fields."""
    found = [
        i
        for i, r in enumerate(records)
        if r["type"] == type and all(r.get(k) == v for k, v in match.items())
    ]
    return found[occurrence]


def move(records: list[Record], source: int, target: int) -> None:
    records.insert(target, records.pop(source))


def interrupted_at(records: list[Record]) -> int:
    return next(i for i, r in enumerate(records) if r.get("interrupted") is True)


def _drop(type: str, occurrence: int = 0, **match: Any) -> Mutation:
    return lambda r: r.pop(at(r, type, occurrence, **match))


def _edit(kind: str, changes: dict[str, Any], occurrence: int = 0, **match: Any) -> Mutation:
    return lambda r: r[at(r, kind, occurrence, **match)].update(changes)


def _duplicate(type: str, occurrence: int = 0, **match: Any) -> Mutation:
    def mutate(records: list[Record]) -> None:
        i = at(records, type, occurrence, **match)
        records.insert(i + 1, copy.deepcopy(records[i]))

    return mutate


def _move_after_turn_end(records: list[Record]) -> None:
    move(records, at(records, "stream/delta", turn=1), at(records, "turn/end", turn=1))


def _old_turn_record(records: list[Record]) -> None:
    records.insert(at(records, "turn/end", turn=4), copy.deepcopy(records[2]) | {"step": 0})


def _renumber_turn(records: list[Record]) -> None:
    for record in records:
        if record["turn"] == 2:
            record["turn"] = 5


def _reuse_attempt(records: list[Record]) -> None:
    for record in records:
        if record["turn"] == 4 and "attempt" in record:
            record["attempt"] = "att_1"


def _message_after_abandoned_end(records: list[Record]) -> None:
    end = at(records, "stream/end", turn=4)
    records[end]["outcome"] = "abandoned"
    move(records, end, end - 1)


def _attempt_after_committed_end(records: list[Record]) -> None:
    message = at(records, "assistant/message", turn=4)
    records[message] = {**records[message], "type": "assistant/attempt", "outcome": "empty"}
    move(records, message, message + 1)


def _reuse_call_id(records: list[Record]) -> None:
    records[at(records, "assistant/message", turn=4)]["content"].append(call("call_1"))


def _interrupted_extra_text(records: list[Record]) -> None:
    records[interrupted_at(records)]["content"].append(text("never delivered"))


def _interrupted_tool_call(records: list[Record]) -> None:
    records[interrupted_at(records)]["content"].append(call("call_9"))


def _interrupted_delta_mismatch(records: list[Record]) -> None:
    delta = at(records, "stream/delta", turn=2, occurrence=1)
    records[delta]["parts"][0][2] = "MILK!"


def _old_stream_delta_mismatch(records: list[Record]) -> None:
    _embed_stream(records)
    _interrupted_delta_mismatch(records)


def _old_stream_malformed(records: list[Record]) -> None:
    records[_embed_stream(records)]["stream"] = [["Milk"]]


def _interrupted_message_after_end(records: list[Record]) -> None:
    i = interrupted_at(records)
    move(records, i, i + 1)


def _swap_after_interrupt(records: list[Record]) -> None:
    i = interrupted_at(records)
    records[i + 1], records[i + 2] = records[i + 2], records[i + 1]


def _record_after_interrupt(records: list[Record]) -> None:
    i = interrupted_at(records)
    error = {"kind": "x", "message": "", "retryable": False, "status": None, "request_id": None}
    records.insert(
        i + 1, {**records[i + 2], "type": "agent/request-error", "attempt": None, "error": error}
    )
    del records[i + 1]["reason"]


def _user_message_in_step(records: list[Record]) -> None:
    move(records, at(records, "user/message", turn=1), at(records, "step/start", turn=1))


LOG_RULES: list[tuple[str, Mutation, str]] = [
    (
        "unknown type",
        _edit("step/start", {"type": "step/pause"}),
        "unknown record type 'step/pause'",
    ),
    ("negative step", _edit("step/start", {"step": -1}), "step must be a non-negative integer"),
    ("session/start not first", lambda r: move(r, 0, 1), "session/start must be the first record"),
    ("turn 0 record", _edit("turn/start", {"turn": 0}), "a turn/start record cannot be in turn 0"),
    ("record before any turn", lambda r: move(r, 1, 5), "while no turn is current"),
    ("turn numbers skip", _renumber_turn, "turn/start for turn 5 step 0, expected turn 2"),
    ("turn starts before the last ended", _drop("turn/end"), "turn/start before turn 1 ended"),
    (
        "session/start in a turn",
        _edit("session/start", {"turn": 1}),
        "a session/start record cannot be in turn 1 step 0",
    ),
    ("record after turn/end", _move_after_turn_end, "after turn 1 ended"),
    ("record of an older turn", _old_turn_record, "a record of turn 1 while turn 4 is current"),
    ("two user messages", _duplicate("user/message"), "a turn has one user/message"),
    ("user message in a step", _user_message_in_step, "a turn has one user/message"),
    ("turn-level record in a step", _edit("turn/end", {"step": 2}), "turn-level record"),
    ("step numbers skip", _edit("step/start", {"step": 2}), "step/start for step 2, expected 1"),
    ("overlapping steps", _drop("step/end"), "step/start while step 1 is open"),
    ("record outside its step", _edit("stream/delta", {"step": 2}), "but the open step is 1"),
    (
        "record between steps",
        _edit("step/start", {"type": "agent/request-error", "attempt": None, "error": {}}, 1),
        "but the open step is none",
    ),
    ("open step at turn/end", _drop("step/end", turn=1, step=2), "turn/end while step 2 is open"),
    ("stream not ended", _drop("stream/end"), "step/end before the stream/end of attempt 'att_1'"),
    ("stream ended twice", _duplicate("stream/end"), "a second stream/end"),
    ("attempt id reused", _reuse_attempt, "attempt id 'att_1' is used twice"),
    (
        "delta of another attempt",
        _edit("stream/delta", {"attempt": "att_x"}),
        "not started in this step",
    ),
    ("attempt id missing", _edit("stream/start", {"attempt": ""}), "non-empty attempt id"),
    ("unknown outcome", _edit("stream/end", {"outcome": "done"}), "unknown stream outcome 'done'"),
    (
        "committed without message",
        _drop("assistant/message", turn=4),
        "committed but has no assistant/message",
    ),
    (
        "abandoned with message",
        _edit("stream/end", {"outcome": "abandoned"}, turn=4),
        "cannot be abandoned",
    ),
    ("message after abandoned end", _message_after_abandoned_end, "for an abandoned attempt"),
    (
        "two messages for an attempt",
        _duplicate("assistant/message", turn=4),
        "already has a assistant/message",
    ),
    ("attempt for a committed stream", _attempt_after_committed_end, "for a committed attempt"),
    ("tool/result without tool/call", _drop("tool/call"), "which has no tool/call in this step"),
    ("two tool/results", _duplicate("tool/result"), "a second tool/result for 'call_1'"),
    ("tool/call without tool/result", _drop("tool/result"), "step/end before the tool/result"),
    (
        "tool/call never announced",
        _edit("tool/call", {"tool_call_id": "call_x"}),
        "was not called by an assistant message",
    ),
    ("tool/call twice", _duplicate("tool/call"), "tool/call id 'call_1' is missing or used twice"),
    ("tool call id reused", _reuse_call_id, "tool call id 'call_1' is missing or used twice"),
    (
        "tool call input",
        lambda r: r[at(r, "assistant/message")]["content"][1].update(input=[]),
        "input must be an object",
    ),
    ("tool shown twice", _duplicate("tool/announce"), "tool call 'call_1' is announced twice"),
    ("tool update never announced", _drop("tool/announce"), "not announced in this turn"),
    ("tool update after its final status", _duplicate("tool/update"), "after its final status"),
    (
        "tool shown without a final status",
        _drop("tool/update"),
        "turn/end before the final tool/update of 'call_1'",
    ),
    (
        "tool update for another call",
        _edit("tool/update", {"tool_call_id": "call_x"}),
        "update must be an object for 'call_x'",
    ),
    ("negative usage", _edit("usage/update", {"used": -1}), "usage/update used"),
    # Turn level (after a compaction) only between steps.
    ("turn-level usage in a step", _edit("usage/update", {"step": 0}), "usage/update while step"),
    (
        "retry without its number",
        _edit("agent/request-error", {"retrying": True}),
        "needs retry_attempt",
    ),
    ("interrupted content", _interrupted_extra_text, "exactly the non-blank text"),
    ("interrupted tool call", _interrupted_tool_call, "exactly the non-blank text"),
    ("interrupted message not its deltas", _interrupted_delta_mismatch, "exactly the non-blank"),
    ("deltas not in stream", _old_stream_delta_mismatch, "is not in the message's stream"),
    ("stream malformed", _old_stream_malformed, "timed stream of an interrupted"),
    ("interrupted after stream/end", _interrupted_message_after_end, "after its stream/end"),
    (
        "order after interrupt",
        _swap_after_interrupt,
        r"expected the stream/end \(committed\) of attempt 'att_3', "
        r"found step/end \(cancelled\)",
    ),
    ("record after interrupt", _record_after_interrupt, "found agent/request-error"),
    (
        "interrupted turn ends normally",
        _edit("turn/end", {"reason": "end_turn"}, turn=2),
        "expected turn/end \\(cancelled\\), found turn/end \\(end_turn\\)",
    ),
    (
        "interrupted step ends normally",
        _edit("step/end", {"reason": "end_turn"}, turn=2),
        "expected step/end \\(cancelled\\), found step/end \\(end_turn\\)",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "reason"), [pytest.param(m, r, id=name) for name, m, r in LOG_RULES]
)
def test_check_log_rejects(mutate: Mutation, reason: str) -> None:
    records = realistic_log()
    mutate(records)
    for seq, record in enumerate(records):
        record["seq"] = seq
    with pytest.raises(LogInvalid, match=reason):
        check_log(records)


def test_check_log_rejects_a_seq_gap() -> None:
    records = realistic_log()
    del records[5]
    with pytest.raises(LogInvalid, match="seq is 6, expected 5") as caught:
        check_log(records)
    assert caught.value.seq == 5


# -- random logs --------------------------------------------------------------------

WORDS = st.text(alphabet="ab \n", max_size=5)  # often blank, sometimes empty
FAILED = "\u2717"  # marks text that only failed attempts delivered


@st.composite
def stream_chunks(draw: st.DrawFn, max_blocks: int = 3) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index in range(draw(st.integers(0, max_blocks))):
        kind = draw(st.sampled_from(["text", "reasoning"]))
        chunks.extend(
            (index, kind, piece) for piece in draw(st.lists(WORDS, min_size=1, max_size=3))
        )
    return chunks


def _calls(b: LogBuilder, data: st.DataObject) -> list[Block]:
    return [call(b.new_id("call"), n=n) for n in range(data.draw(st.integers(1, 2)))]


def _reply(b: LogBuilder, data: st.DataObject) -> None:
    finish = data.draw(st.sampled_from(["end_turn", "max_tokens", "refusal"]))
    b.reply_step(data.draw(stream_chunks()), finish)
    b.end_turn(finish)


def _cancel_streaming(b: LogBuilder, data: st.DataObject) -> None:
    b.start_step()
    chunks = data.draw(stream_chunks())
    if data.draw(st.booleans()):  # a tool call was still streaming its arguments
        chunks.append((len(chunks) + 5, "tool_args", '{"half'))
    b.interrupt(b.stream(chunks), chunks)


def _cancel_in_tools(b: LogBuilder, data: st.DataObject) -> None:
    b.start_step()
    calls = _calls(b, data)
    attempt = b.stream([(0, "text", "Running")])
    b.commit(attempt, [text("Running"), *calls], "tool_use")
    ran = data.draw(st.integers(0, len(calls)))
    for i, block in enumerate(calls):
        b.tool(
            block,
            "partial" if i < ran else "ABORTED_BEFORE_DISPATCH",
            status="dispatched" if i < ran else "aborted",
        )
    b.end_step("cancelled")
    b.end_turn("cancelled")


def _fail(b: LogBuilder, data: st.DataObject) -> None:
    outcome = data.draw(st.sampled_from(["provider_error", "timed_out", "disconnected"]))
    b.start_step()
    chunks = [(i, k, FAILED + t) for i, k, t in data.draw(stream_chunks())]
    attempt = b.stream(chunks)
    b.abandon(attempt, outcome, visible_blocks(chunks))
    if outcome != "disconnected":
        b.request_error(attempt)
    b.end_step(outcome)
    b.end_turn("disconnected" if outcome == "disconnected" else "error")


def _retry(b: LogBuilder, data: st.DataObject) -> None:
    b.start_step()
    failed = b.stream([(0, "text", FAILED + "half")])
    b.abandon(failed, "provider_error", [text(FAILED + "half")])
    b.request_error(failed)
    chunks = data.draw(stream_chunks())
    b.commit(b.stream(chunks), visible_blocks(chunks), "end_turn")
    b.end_step("end_turn")
    b.end_turn("end_turn")


def _forced(b: LogBuilder, data: st.DataObject) -> None:
    b.start_step()
    b.stream(data.draw(stream_chunks()))
    b.end_turn("cancelled", forced=True)


def _out_of_steps(b: LogBuilder, data: st.DataObject) -> None:
    b.end_turn("max_turn_requests")


ENDINGS = [_reply, _cancel_streaming, _cancel_in_tools, _fail, _retry, _forced, _out_of_steps]


def random_turn(b: LogBuilder, data: st.DataObject) -> None:
    b.prompt(*data.draw(st.lists(WORDS, min_size=1, max_size=2)))
    for _ in range(data.draw(st.integers(0, 2))):
        b.tool_step(data.draw(stream_chunks(max_blocks=2)), _calls(b, data))
        b.end_step("tool_use")
    data.draw(st.sampled_from(ENDINGS))(b, data)


@settings(max_examples=150, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_random_logs_are_valid_at_a_random_cut(data: st.DataObject) -> None:
    b = LogBuilder()
    for _ in range(data.draw(st.integers(1, 5))):
        random_turn(b, data)
    check_log(b.records)
    cut = data.draw(st.integers(0, len(b.records)))
    prefix = b.records[:cut]
    check_log(prefix)  # runs check_history(derive_messages(prefix)) too
    messages = derive_messages(prefix)
    check_history(messages)
    assert FAILED not in json.dumps(messages, ensure_ascii=False)  # invariant I5
