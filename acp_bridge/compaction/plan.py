"""Compacting a history, the pure part: what a summary replaces, and the request that asks for it.

The history a compaction leaves is: the system prompt (sent as it always is),
a user message with the summary, then the most recent messages verbatim.  A
plan works on the log's surface records as the current history has them
(`acp_bridge.log.derive.Surface`: `compacted_records`, refused, left-out and
replaced replies taken out):

* the verbatim part starts at a *boundary*, a user message or an assistant
  message: never at a tool result, so a tool call and its result are
  summarized together or kept together; and never before the ``kept_from``
  of the compaction in effect (the surface's floor): a message an earlier
  compaction pinned is summarized or pinned again, since a ``kept_from``
  below the floor would bring back, verbatim, what that compaction
  summarized;
* it is the longest tail of the history that fits the ``keep`` budget
  (`KEEP_FRACTION` of the history's estimated size, and never more than that
  share of the window); a ``/compact`` keeps none;
* some older messages are *pinned* (kept verbatim though before the
  boundary): the interrupted message of the latest Stop (invariant I8), and,
  for a compaction inside a turn, the prompt being answered;
* the summary request is the history before the boundary, then a user
  message with `SUMMARY_INSTRUCTION` (and what the user asked of a
  ``/compact``).  It goes with the same tool definitions (a provider may
  refuse tool calls in a history without them) and asks for no tool call.

There is nothing to compact when nothing but an earlier summary and pinned
messages would be summarized.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..context.estimate import estimate_json
from ..log.derive import Surface, derive_messages, is_visible_text

__all__ = [
    "KEEP_FRACTION",
    "SUMMARY_INSTRUCTION",
    "plan_compaction",
    "summary_messages",
]

# The verbatim tail may take at most this share of the history (and of the window).
KEEP_FRACTION: Final = 0.25

SUMMARY_INSTRUCTION: Final = (
    "The conversation above is about to be replaced by a summary, because it no longer fits "
    "your context window. Write that summary now, for yourself: after it you will continue "
    "the work with the summary and the most recent messages only. Keep what you will need: "
    "the user's goals and requests in their own words where they matter, decisions and "
    "their reasons, the files, functions and commands involved (exact paths and names), "
    "what the tools showed that is still relevant, what is done, what is left, and the next "
    "step. If the user stopped a reply, say so. Be concise and concrete. Answer with the "
    "summary only, as plain text: no tool calls, no greeting."
)

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    # Surface records from this seq on stay verbatim (None: none does).
    kept_from: int | None
    # Seqs of older surface records kept verbatim.
    pinned: tuple[int, ...]
    # The history the summary replaces (what the summary request summarizes).
    summarized: list[dict[str, Any]]
    # How many messages of the current history the summary replaces.
    replaced: int


def plan_compaction(
    surface: Surface, *, keep_tokens: int, keep_prompt: bool, current: int | None = None
) -> CompactionPlan | None:
    """What to compact in the history of a log, given as its `Surface`
    (`acp_bridge.log.derive.live_surface`, or a session's
    `HistoryProjection.surface`).

    ``keep_tokens``: the budget of the verbatim tail (0 keeps none);
    ``keep_prompt``: pin the prompt being answered (a compaction inside a
    turn); ``current``: the number of messages of the history, when the
    caller has it (else it is derived again).  None when there is nothing to
    compact.
    """
    live = surface.records
    pins = _pins(live, keep_prompt)
    boundary = _boundary(live, keep_tokens, pins, surface.floor)
    before = live[:boundary]
    if not any(_seq(r) is not None and _seq(r) not in pins for r in before):
        return None  # only an earlier summary, or only pinned messages
    kept_from = _seq(live[boundary]) if boundary < len(live) else None
    summarized = derive_messages(before)
    if not summarized:
        return None
    kept = [*live[boundary:], *(r for r in before if _seq(r) in pins)]
    if current is None:
        current = len(derive_messages(live))
    replaced = current - _verbatim_messages(kept)
    return CompactionPlan(
        kept_from=kept_from,
        pinned=tuple(sorted(seq for seq in pins if kept_from is None or seq < kept_from)),
        summarized=summarized,
        replaced=max(replaced, 1),
    )


def summary_messages(
    summarized: Sequence[Mapping[str, Any]], instructions: str | None
) -> list[dict[str, Any]]:
    """The history of a summary request: what is summarized, then the instruction."""
    text = SUMMARY_INSTRUCTION
    if instructions and instructions.strip():
        text += "\n\nThe user asked for this summary with these instructions: " + (
            instructions.strip()
        )
    block = {"type": "text", "text": text}
    messages = [dict(message) for message in summarized]
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        messages[-1] = {**last, "content": [*last["content"], block]}
    else:
        messages.append({"role": "user", "content": [block], "interrupted": False})
    return messages


# -- internals ------------------------------------------------------------------------


def _pins(live: Sequence[Record], keep_prompt: bool) -> set[int]:
    """The latest Stop's interrupted message, and (``keep_prompt``) the last prompt."""
    interrupted = [
        r for r in live if r.get("type") == "assistant/message" and r.get("interrupted") is True
    ]
    prompts = [r for r in live if r.get("type") == "user/message" and _has_prompt(r)]
    chosen = interrupted[-1:] + (prompts[-1:] if keep_prompt else [])
    return {seq for r in chosen if (seq := _seq(r)) is not None}


def _boundary(live: Sequence[Record], keep_tokens: int, pins: set[int], floor: int | None) -> int:
    """The index in ``live`` where the verbatim tail starts (``len(live)``: no tail)."""
    pinned_cost = sum(_cost(r) for r in live if _seq(r) in pins)
    best = len(live)
    tail = 0
    for index in range(len(live) - 1, -1, -1):
        record = live[index]
        if _seq(record) not in pins:
            tail += _cost(record)
        if tail + pinned_cost > keep_tokens:
            break
        if _is_boundary(record, floor):
            best = index
    return best


def _is_boundary(record: Record, floor: int | None) -> bool:
    seq = _seq(record)
    if seq is None:
        return False  # the summary of an earlier compaction: always summarized again
    if floor is not None and seq < floor:
        return False  # a message an earlier compaction pinned (see the module docstring)
    kind = record.get("type")
    if kind == "assistant/message":
        return True
    return kind == "user/message" and _has_prompt(record)


def _has_prompt(record: Record) -> bool:
    content = record.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping)
        and (b.get("type") not in ("text", "reasoning") or is_visible_text(b.get("text")))
        for b in content
    )


def _verbatim_messages(kept: Sequence[Record]) -> int:
    return len(derive_messages(sorted(kept, key=lambda r: _seq(r) or 0)))


def _cost(record: Record) -> int:
    return estimate_json(record.get("content"))


def _seq(record: Record) -> int | None:
    seq = record.get("seq")
    return seq if type(seq) is int else None
