"""Token estimates, for deciding before a request whether it would fit.

The next request's size is estimated from the last model response in the
current history that reported usage: its input plus output tokens (what the
provider counted for that request and its answer), plus an estimate of what
was added since (tool results, the new prompt) at one token per
`CHARS_PER_TOKEN` characters of JSON.  Without such a response (none reported
usage, or a compaction came after it) the whole request is estimated that
way: history, system prompt and tool definitions.  An image counts as
`IMAGE_TOKENS`.  The estimate errs on the large side for code and prose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ..log.derive import completed_compaction, excluded_turns, replaced_turns
from ..log.records import SURFACE_TYPES

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "estimate_json",
    "estimate_request",
    "estimate_text",
    "next_request_tokens",
]

CHARS_PER_TOKEN: Final = 4
IMAGE_TOKENS: Final = 1_600

Record = Mapping[str, Any]


def estimate_text(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_json(value: Any) -> int:
    """Tokens of a JSON value (a message, a block, a record's content); images at a flat rate."""
    images = 0

    def strip(v: Any) -> Any:
        nonlocal images
        if isinstance(v, Mapping):
            if v.get("type") == "image" or (v.get("type") == "resource" and "blob" in v):
                images += 1
                return None
            return {k: strip(x) for k, x in v.items()}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    data = orjson.dumps(strip(value), default=str)
    return -(-len(data) // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def estimate_request(messages: Sequence[Any], system: str | None, tools: Sequence[Any]) -> int:
    """The estimated input tokens of a whole request."""
    specs = [
        {"name": t.name, "description": t.description, "schema": t.input_schema} for t in tools
    ]
    return estimate_json(list(messages)) + estimate_text(system or "") + estimate_json(specs)


def next_request_tokens(
    records: Sequence[Record],
    messages: Sequence[Any],
    system: str | None,
    tools: Sequence[Any],
) -> int:
    """The estimated input tokens of the next request of a session (see the module docstring).

    ``records`` are the log's model records (`acp_bridge.log.writer.MODEL_TYPES`),
    ``messages`` the history they derive.
    """
    anchored = _anchor(records)
    if anchored is None:
        return estimate_request(messages, system, tools)
    used, since = anchored
    return used + sum(estimate_json(record.get("content")) for record in since)


def _anchor(records: Sequence[Record]) -> tuple[int, list[Record]] | None:
    """The usage of the last response since the last compaction, and the records after it."""
    start = 0
    for position, record in enumerate(records):
        if completed_compaction(record):
            start = position + 1
    excluded = excluded_turns(records)
    replaced = replaced_turns(records)
    since: list[Record] = []
    for record in reversed(records[start:]):
        kind = record.get("type")
        if kind not in SURFACE_TYPES or record.get("turn") in excluded:
            continue
        if kind != "user/message" and record.get("turn") in replaced:
            continue
        usage = record.get("usage") if kind == "assistant/message" else None
        if isinstance(usage, Mapping) and _count(usage.get("input_tokens")):
            return _count(usage.get("input_tokens")) + _count(usage.get("output_tokens")), since
        since.append(record)
    return None


def _count(value: object) -> int:
    return value if type(value) is int and value > 0 else 0
