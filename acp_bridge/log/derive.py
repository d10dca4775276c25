"""The model history, as a pure function of the event log (invariant I4).

`derive_messages` turns a session's records into the provider-neutral message
list every provider adapter receives (``ModelRequest.messages``)::

    {"role": "user" | "assistant",
     "content": [HistoryBlock, ...],       # never empty
     "interrupted": bool,                  # on every message; true only for an
                                           # assistant message cut short: by a user
                                           # stop, or by a crash (then also:)
     "crashed": true}                      # only on an interrupted message that
                                           # crash recovery rebuilt (`log.reopen`)

Only the three surface records contribute: ``user/message`` and
``assistant/message`` become messages, and each ``tool/result`` becomes a
``{"type": "tool_result", "tool_call_id", "content", "is_error"}`` block at
the start of the user message after the assistant message that called it.

The result is valid for a provider at *any* cut of the log (a crash mid-turn,
a missing ``turn/end``), and `acp_bridge.log.check.check_history` accepts it:

* consecutive messages of the same role are merged into one, tool results
  first (a cancel before the first token leaves two user messages in a row);
* a turn whose ``turn/end`` reason is ``refusal`` is left out entirely (ACP:
  the refused prompt and all that came after it in the turn are not sent
  again), and so is a turn whose ``turn/end`` says ``left_out: true`` (its
  prompt did not fit the model's context window even after compaction: the
  session goes on without it);
* the last ``compaction`` record with status ``completed`` replaces what came
  before it (`compacted_records`): the history starts with a user message
  holding its summary (`summary_text`), then the surface records it kept
  verbatim (``pinned``, and every one from seq ``kept_from`` on), then those
  after it; earlier compactions are superseded (their summaries are in the
  newer one);
* a ``/clear`` turn (``turn/start`` with ``command: "clear"``) starts the
  history over: only the records after the last one count (`is_clear`);
* a regenerate is a turn whose ``turn/start`` has ``regenerates: N`` (the
  user turn it answers again) and no user message: the replies of turn N and
  of every earlier regenerate of N are left out (they stay in the log), so
  the history holds the user's message and the newest attempt only;
* a ``tool_call`` block without its ``tool/result`` in the next user message
  is dropped, and so is a result whose call is not in the assistant message
  just before it, or a call whose id was already used earlier;
* whitespace-only text and reasoning blocks are dropped, and so are blocks
  that are malformed or not allowed for the role;
* a message left empty is dropped, and so is an assistant message that would
  open the history.

The function never mutates its input and shares no objects with it.
`acp_bridge.log.projection.HistoryProjection` keeps the same history up to
date as records are appended, at a cost per record that does not grow with
the log; a running session uses it (`acp_bridge.log.writer.SessionLog.history`).

This module is a little over 400 lines because the rules above are one
function's: split, a reader would have to look in two places to know what the
model sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import groupby
from typing import Any, Final, NamedTuple

from .records import RECOVERED_CRASHED, SURFACE_TYPES

__all__ = [
    "ASSISTANT_BLOCK_TYPES",
    "SUMMARY_HEADER",
    "TEXT_TYPES",
    "USER_BLOCK_TYPES",
    "Surface",
    "apply_compaction",
    "compacted_records",
    "completed_compaction",
    "delivered_prefix",
    "derive_messages",
    "excluded_turns",
    "has_tool_blocks",
    "is_visible_text",
    "join_parts",
    "leaves_out",
    "live_records",
    "live_surface",
    "note_regenerate",
    "pinned_seqs",
    "replaced_turns",
    "settle",
    "summary_text",
    "surface_message",
    "visible_blocks",
]

Message = dict[str, Any]
Block = dict[str, Any]

# Block types a message of each role may hold (tool results come only from
# ``tool/result`` records).
ASSISTANT_BLOCK_TYPES: Final = frozenset({"text", "reasoning", "tool_call"})
USER_BLOCK_TYPES: Final = frozenset({"text", "resource_link", "resource", "image", "tool_result"})
_PROMPT_BLOCK_TYPES: Final = USER_BLOCK_TYPES - {"tool_result"}
TEXT_TYPES: Final = frozenset({"text", "reasoning"})
_TOOL_TYPES: Final = frozenset({"tool_call", "tool_result"})

# How the summary of a compaction opens the history's first user message.
SUMMARY_HEADER: Final = (
    "[The earlier part of this conversation was compacted to fit the context window. "
    "This is a summary of it; the messages after it are verbatim.]"
)


def derive_messages(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The model history of a log (see the module docstring for the rules)."""
    records = list(records)
    refused, replaced = excluded_turns(records), replaced_turns(records)
    live = live_records(compacted_records(records), refused, replaced)
    return settle([surface_message(record) for record in live])[0]


class Surface(NamedTuple):
    """The surface records of a log's current history, and its floor."""

    # The surface records the history is made of, in order (`live_records`),
    # the summary of the compaction in effect first.
    records: list[Mapping[str, Any]]
    # The ``kept_from`` of that compaction (None: none since the start or the
    # last /clear).  What it summarized is older than this ``seq``, save the
    # records it pinned: a later compaction keeps nothing from before it.
    floor: int | None


def live_surface(records: Sequence[Mapping[str, Any]]) -> Surface:
    """The `Surface` of ``records`` (`HistoryProjection.surface` keeps it up to date)."""
    floor = None
    for record in records:
        if completed_compaction(record):
            floor = record["kept_from"]
        elif is_clear(record):
            floor = None
    view = compacted_records(records)
    return Surface(live_records(view, excluded_turns(records), replaced_turns(records)), floor)


def live_records(
    view: Iterable[Mapping[str, Any]], refused: AbstractSet[Any], replaced: AbstractSet[Any]
) -> list[Mapping[str, Any]]:
    """The surface records of ``view`` (`compacted_records`) the history is made of:
    none of a turn in ``refused``, no reply of a turn in ``replaced``."""
    return [
        record
        for record in view
        if record.get("type") in SURFACE_TYPES
        and record.get("turn") not in refused
        # A reply a later regenerate replaced is left out; its prompt stays.
        and (record.get("type") == "user/message" or record.get("turn") not in replaced)
    ]


def completed_compaction(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a ``compaction`` that changes the history.

    It must be ``completed``, with a visible ``summary`` and an integer
    ``kept_from``; ``pinned``, if given, must be a list (its non-integers are
    ignored).  Any other compaction record leaves the history as it was.
    """
    return (
        record.get("type") == "compaction"
        and record.get("status") == "completed"
        and is_visible_text(record.get("summary"))
        and type(record.get("kept_from")) is int
        and isinstance(record.get("pinned", []), list)
    )


def summary_text(summary: str) -> str:
    """The text of the user message a compaction's summary becomes."""
    return SUMMARY_HEADER + "\n\n" + summary.strip()


def is_clear(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` starts a ``/clear`` turn: the history starts over after it."""
    return record.get("type") == "turn/start" and record.get("command") == "clear"


def compacted_records(records: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The surface records the history is made of, after the last completed compaction.

    Only the records after the last ``/clear`` (`is_clear`) count at all.

    Without one, ``records`` itself.  With one (at position ``c``): a
    ``user/message`` of turn 0 holding its summary, the records before ``c``
    whose ``seq`` is in ``pinned``, those before ``c`` whose ``seq`` is at
    least ``kept_from``, and every record after ``c`` (a record after it is
    kept whatever its ``seq``).  Turn 0 is never refused or regenerated, so
    the summary stays whatever happens to the turns it summarized.
    """
    last = None
    start = 0
    for position, record in enumerate(records):
        if completed_compaction(record):
            last = position
        elif is_clear(record):
            start, last = position + 1, None
    if start:
        records = records[start:]
        if last is not None:
            last -= start
    if last is None:
        return records
    out = apply_compaction(records[:last], records[last])
    out.extend(records[last + 1 :])
    return out


def apply_compaction(
    before: Iterable[Mapping[str, Any]], compaction: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """What a completed compaction leaves of the records ``before`` it: the
    user message of turn 0 with its summary, then those of ``before`` whose
    ``seq`` it pinned or is at least its ``kept_from``, in their order."""
    kept_from: int = compaction["kept_from"]
    pinned = pinned_seqs(compaction)
    summary: dict[str, Any] = {
        "type": "user/message",
        "turn": 0,
        "step": 0,
        "content": [{"type": "text", "text": summary_text(compaction["summary"])}],
    }
    out: list[Mapping[str, Any]] = [summary]
    for record in before:
        # In log order the pinned records (before kept_from) come first.
        seq = record.get("seq")
        if type(seq) is int and (seq >= kept_from or seq in pinned):
            out.append(record)
    return out


def pinned_seqs(compaction: Mapping[str, Any]) -> frozenset[int]:
    """The seqs a compaction pins that count: its ``pinned`` integers."""
    return frozenset(seq for seq in compaction.get("pinned", ()) if type(seq) is int)


def replaced_turns(records: Iterable[Mapping[str, Any]]) -> set[int]:
    """The turns whose replies a later regenerate replaced.

    A regenerate turn's ``turn/start`` names the user turn it answers again
    (``regenerates``); of that turn and its regenerates, only the last keeps
    its reply in the history.  Only ``turn/start`` records count.
    """
    attempts: dict[int, list[int]] = {}
    replaced: set[int] = set()
    for record in records:
        if record.get("type") != "turn/start":
            continue
        target = record.get("regenerates")
        turn = record.get("turn")
        if type(target) is int and type(turn) is int:
            note_regenerate(attempts, replaced, target, turn)
    return replaced


def note_regenerate(
    attempts: dict[int, list[int]], replaced: set[Any], target: int, turn: int
) -> None:
    """Record that ``turn`` regenerates ``target``: every earlier attempt is replaced."""
    group = attempts.setdefault(target, [target])
    replaced.update(group)
    group.append(turn)


def delivered_prefix(
    records: Iterable[Mapping[str, Any]], attempt: str
) -> dict[tuple[int, str], str]:
    """The text of one attempt delivered to the editor, per ``(index, kind)``.

    Concatenates the parts of the attempt's ``stream/delta`` records; the keys
    are in the order they first appeared in the stream.
    """
    return join_parts(
        part
        for record in records
        if record.get("type") == "stream/delta" and record.get("attempt") == attempt
        for part in record.get("parts", ())
    )


def join_parts(parts: Iterable[Sequence[Any]]) -> dict[tuple[int, str], str]:
    """Concatenate stream parts, ``[index, kind, text]`` or timed ``[t_ms, index,
    kind, text]``, per ``(index, kind)``, in the order the keys first appear."""
    pieces: dict[tuple[int, str], list[str]] = {}
    for part in parts:
        index, kind, text = part[-3:]
        pieces.setdefault((index, kind), []).append(text)
    return {key: "".join(texts) for key, texts in pieces.items()}


def visible_blocks(texts: Mapping[tuple[int, str], str]) -> list[dict[str, Any]]:
    """What a stopped stream leaves as an interrupted message (invariant I2):
    its text and reasoning blocks with visible text, in stream order."""
    return [
        {"type": kind, "text": text}
        for (_, kind), text in texts.items()
        if kind in ("text", "reasoning") and is_visible_text(text)
    ]


# -- from records to raw messages ---------------------------------------------


def excluded_turns(records: Iterable[Mapping[str, Any]]) -> set[int]:
    """The turns left out of the history: refused, or left out by the agent."""
    return {record["turn"] for record in records if leaves_out(record)}


def leaves_out(record: Mapping[str, Any]) -> bool:
    """A ``turn/end`` that takes its turn out of the history (refusal, ``left_out``)."""
    return record.get("type") == "turn/end" and (
        record.get("reason") == "refusal" or record.get("left_out") is True
    )


def surface_message(record: Mapping[str, Any]) -> Message:
    kind = record["type"]
    if kind == "user/message":
        return _message("user", _clean_blocks(record.get("content"), _PROMPT_BLOCK_TYPES))
    if kind == "assistant/message":
        content = _clean_blocks(record.get("content"), ASSISTANT_BLOCK_TYPES)
        interrupted = record.get("interrupted") is True
        crashed = interrupted and record.get("recovered") == RECOVERED_CRASHED
        return _message("assistant", content, interrupted=interrupted, crashed=crashed)
    result = _tool_result_block(record)  # tool/result
    return _message("user", [] if result is None else [result])


def _message(
    role: str, content: list[Block], *, interrupted: bool = False, crashed: bool = False
) -> Message:
    message: Message = {"role": role, "content": content, "interrupted": interrupted}
    if crashed:
        message["crashed"] = True
    return message


def _crashed(messages: Sequence[Message]) -> bool:
    """Whether the last interrupted message of ``messages`` was cut by a crash."""
    last = next((m for m in reversed(messages) if m["interrupted"]), None)
    return last is not None and last.get("crashed") is True


def _tool_result_block(record: Mapping[str, Any]) -> Block | None:
    call_id = record.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        return None
    return {
        "type": "tool_result",
        "tool_call_id": call_id,
        "content": _clean_blocks(record.get("content"), _PROMPT_BLOCK_TYPES),
        "is_error": record.get("is_error") is True,
    }


def _clean_blocks(blocks: object, allowed: frozenset[str]) -> list[Block]:
    """Copies of the well-formed blocks of an allowed type, without blank text."""
    if not isinstance(blocks, list):
        return []
    return [_copy_json(block) for block in blocks if _keep_block(block, allowed)]


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists and immutable scalars); faster than deepcopy.

    A value of a scalar type is taken as it is without a call: most blocks
    are flat (a text block is two strings), and a call per field was most of
    the cost of a history's messages.
    """
    if isinstance(value, dict):
        return {
            key: item if type(item) in _SCALARS else _copy_json(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [item if type(item) in _SCALARS else _copy_json(item) for item in value]
    return value


# The immutable types of JSON data, copied by reference (exact types: a
# subclass goes through `_copy_json`, which copies it as before).
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _keep_block(block: object, allowed: frozenset[str]) -> bool:
    if not isinstance(block, dict) or block.get("type") not in allowed:
        return False
    if block["type"] in TEXT_TYPES:
        return is_visible_text(block.get("text"))
    if block["type"] == "tool_call":
        return (
            _is_nonempty_str(block.get("id"))
            and _is_nonempty_str(block.get("name"))
            and isinstance(block.get("input"), dict)
        )
    return True


def is_visible_text(text: object) -> bool:
    """Whether ``text`` is a string with at least one non-whitespace character."""
    return isinstance(text, str) and bool(text) and not text.isspace()


def _is_nonempty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


# -- from raw messages to a valid history -------------------------------------


def settle(
    messages: list[Message], used: frozenset[str] = frozenset(), keep_leading: bool = False
) -> tuple[list[Message], set[str]]:
    """Apply the repairs until nothing changes; also return the call ids of the first pass.

    Each pass only removes or merges, so this ends; a second pass is needed
    only when dropping a leading assistant message orphans tool results.
    ``used`` holds tool call ids taken before these messages, and
    ``keep_leading`` says the messages follow a user message (see
    `HistoryProjection`).
    """
    if not has_tool_blocks(messages):
        return _settle_without_tools(messages, keep_leading), set(used)
    return _settle_paired(messages, used, keep_leading)


def _settle_paired(
    messages: list[Message], used: frozenset[str], keep_leading: bool
) -> tuple[list[Message], set[str]]:
    """`settle` the long way, pairing tool calls with results on every pass
    (what messages with tool blocks need; the reference for the fast path)."""
    first_used: set[str] | None = None
    while True:
        paired, kept = _pair_tool_calls(_merge_same_role(messages), used)
        settled = _drop_empty(paired)
        if not keep_leading:
            settled = _drop_leading_assistant(settled)
        if first_used is None:
            first_used = kept
        if settled == messages:
            return settled, first_used
        messages = settled


def has_tool_blocks(messages: Iterable[Message]) -> bool:
    """Whether any of ``messages`` holds a tool call or a tool result."""
    return any(block["type"] in _TOOL_TYPES for message in messages for block in message["content"])


def _settle_without_tools(messages: list[Message], keep_leading: bool) -> list[Message]:
    """`settle` of messages without tool calls or results: no pairing to do.

    Every pass only merges or drops messages, so one that leaves as many
    messages as it was given changed nothing (the messages are then returned
    as they are, not copied: a history is never mutated).  Most windows of a
    session's projection are one message and take this path.
    """
    while True:
        settled = _drop_empty(_merge_same_role(messages))
        if not keep_leading:
            settled = _drop_leading_assistant(settled)
        if len(settled) == len(messages):
            return settled
        messages = settled


def _merge_same_role(messages: list[Message]) -> list[Message]:
    merged: list[Message] = []
    for role, run in groupby(messages, key=lambda message: message["role"]):
        group = list(run)
        if len(group) == 1:
            merged.append(group[0])
            continue
        content = [block for message in group for block in message["content"]]
        if role == "user":
            content = _tool_results_first(content)
        interrupted = any(message["interrupted"] for message in group)
        merged.append(_message(role, content, interrupted=interrupted, crashed=_crashed(group)))
    return merged


def _tool_results_first(content: list[Block]) -> list[Block]:
    results = [block for block in content if block["type"] == "tool_result"]
    others = [block for block in content if block["type"] != "tool_result"]
    return results + others


def _pair_tool_calls(
    messages: list[Message], used: frozenset[str]
) -> tuple[list[Message], set[str]]:
    """Keep a tool call only with its result right after it, and vice versa.

    Also return the ids of the calls kept (``used`` included).
    """
    out: list[Message] = []
    used_ids: set[str] = set(used)
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = _result_ids(following) - used_ids
            content = _keep_answered_calls(message["content"], answered)
            used_ids.update(_call_ids(content))
        else:
            previous = out[-1]["content"] if out and out[-1]["role"] == "assistant" else []
            content = _keep_called_results(message["content"], _call_ids(previous))
        out.append(
            _message(
                message["role"],
                content,
                interrupted=message["interrupted"],
                crashed=message.get("crashed") is True,
            )
        )
    return out, used_ids


def _keep_answered_calls(content: list[Block], answered: set[str]) -> list[Block]:
    kept: list[Block] = []
    for block in content:
        if block["type"] == "tool_call":
            if block["id"] not in answered:
                continue
            answered = answered - {block["id"]}  # a repeated id in one message
        kept.append(block)
    return kept


def _keep_called_results(content: list[Block], called: list[str]) -> list[Block]:
    waiting = set(called)
    kept: list[Block] = []
    for block in content:
        if block["type"] == "tool_result":
            if block["tool_call_id"] not in waiting:
                continue
            waiting.discard(block["tool_call_id"])  # a second result is dropped
        kept.append(block)
    return kept


def _result_ids(message: Message | None) -> set[str]:
    if message is None or message["role"] != "user":
        return set()
    return {block["tool_call_id"] for block in message["content"] if block["type"] == "tool_result"}


def _call_ids(content: list[Block]) -> list[str]:
    return [block["id"] for block in content if block["type"] == "tool_call"]


def _drop_empty(messages: list[Message]) -> list[Message]:
    return [message for message in messages if message["content"]]


def _drop_leading_assistant(messages: list[Message]) -> list[Message]:
    """A history starts with a user message; drop what comes before the first one."""
    for i, message in enumerate(messages):
        if message["role"] == "user":
            return messages[i:]
    return []
