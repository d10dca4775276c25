"""The rules every provider enforces on a model history (invariant I3).

`check_history` states them independently of how the history was made; the
log's checker (`acp_bridge.log.check.check_log`) applies it to the history it
derives.  Tests call it after every turn; it is never used on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .derive import ASSISTANT_BLOCK_TYPES, TEXT_TYPES, USER_BLOCK_TYPES, is_visible_text

__all__ = ["HistoryInvalid", "check_history"]

_ROLE_BLOCK_TYPES: Final = {"user": USER_BLOCK_TYPES, "assistant": ASSISTANT_BLOCK_TYPES}


class HistoryInvalid(Exception):
    """A model history breaks a provider rule; ``index`` is the message at fault."""

    def __init__(self, reason: str, index: int | None) -> None:
        super().__init__(reason if index is None else f"message {index}: {reason}")
        self.reason = reason
        self.index = index


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
    if block["type"] in TEXT_TYPES and not is_visible_text(block.get("text")):
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
