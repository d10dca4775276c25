"""Token estimates, for deciding before a request whether it would fit.

The next request's size is estimated from the last model response in the
current history that reported usage: its input plus output tokens (what the
provider counted for that request and its answer), plus an estimate of what
was added since (tool results, the new prompt) at one token per
`CHARS_PER_TOKEN` characters of JSON.  Without such a response (none reported
usage, or a compaction came after it) the whole request is estimated that
way: history, system prompt and tool definitions.  An image counts as
`IMAGE_TOKENS`.  The estimate errs on the large side for code and prose.

`RequestEstimate` gives the same numbers for one session at a cost that does
not grow with it (the estimate is asked for before every request): it
remembers the size of each message of the history's stable part and where
the last reported usage is in the log, and looks only at what is new.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ..log.derive import completed_compaction, excluded_turns, leaves_out, replaced_turns
from ..log.records import SURFACE_TYPES

__all__ = [
    "RequestEstimate",
    "estimate_json",
    "estimate_request",
    "next_request_tokens",
]

CHARS_PER_TOKEN: Final = 4
IMAGE_TOKENS: Final = 1_600

Record = Mapping[str, Any]
_NONE: Final[frozenset[int]] = frozenset()


def estimate_text(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_json(value: Any) -> int:
    """Tokens of a JSON value (a message, a block, a record's content); images at a flat rate."""
    size, images = _measure(value)
    return -(-size // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def _measure(value: Any) -> tuple[int, int]:
    """The bytes of ``value``'s JSON with its images left out, and how many images."""
    # Most values hold no image: their JSON as it is, when it names none.
    try:
        data = orjson.dumps(value, default=_plain)
    except orjson.JSONEncodeError:  # a mapping orjson does not know: the long way
        return _measure_stripped(value)
    # ``find``, not ``in``: a bytes ``in`` first tries its operand as an
    # integer, and the error it raises and clears is most of the test's cost.
    if data.find(b'"image"') != -1 or data.find(b'"blob"') != -1:
        return _measure_stripped(value)
    return len(data), 0


def _plain(value: Any) -> str:
    """orjson's fallback: what `_measure_stripped` leaves as it is, as text."""
    if isinstance(value, Mapping):
        raise TypeError("a mapping that is not a dict")
    return str(value)


def _measure_stripped(value: Any) -> tuple[int, int]:
    """`_measure`, by copying ``value`` without its images."""
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
    return len(data), images


def estimate_request(messages: Sequence[Any], system: str | None, tools: Sequence[Any]) -> int:
    """The estimated input tokens of a whole request."""
    return (
        estimate_json(list(messages)) + estimate_text(system or "") + estimate_json(_specs(tools))
    )


def next_request_tokens(
    records: Sequence[Record],
    messages: Sequence[Any],
    system: str | None,
    tools: Sequence[Any],
) -> int:
    """The estimated input tokens of the next request of a session (see the module docstring).

    ``records`` are the log's model records (`acp_bridge.log.records.MODEL_TYPES`),
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


class RequestEstimate:
    """`next_request_tokens` for one session's growing log and history, incrementally.

    Equal to `next_request_tokens` of the same arguments (a test checks it
    along logs with usage, compactions, regenerates and refusals).  Two things
    are remembered between calls:

    * the log's model records (an append-only list, until the session's log
      is read again): how far they were scanned, the turns left out and
      replaced, and the assistant messages that reported usage since the
      last completed compaction;
    * the history: the JSON size of each message of its stable part (a list
      that only grows until the projection starts again, see
      `acp_bridge.log.derive.HistoryView.parts`); the window is measured
      each time.
    """

    __slots__ = (
        "_candidates",
        "_excluded",
        "_records",
        "_replaced",
        "_scanned",
        "_sizes",
        "_stable",
        "_tools",
        "_tools_tokens",
        "_totals",
    )

    def __init__(self) -> None:
        self._records: Sequence[Record] | None = None
        self._scanned = 0
        # Empty until a turn is left out or replaced (most sessions never do):
        # an idle session keeps no set of its own.
        self._excluded: frozenset[int] | set[int] = _NONE
        self._replaced: frozenset[int] | set[int] = _NONE
        # Positions of assistant messages with a usage, after the last compaction.
        self._candidates: list[int] = []
        self._stable: object = None
        # (bytes, images) of each stable message measured so far, and their sums.
        self._sizes: list[tuple[int, int]] = []
        self._totals = (0, 0)
        # The tool definitions last measured (a registry hands out the same
        # tuple until its tools change) and their tokens: their JSON Schemas
        # are the bulk of a short session's request.
        self._tools: object = None
        self._tools_tokens = 0

    def next_request_tokens(
        self,
        records: Sequence[Record],
        messages: Sequence[Any],
        system: str | None,
        tools: Sequence[Any],
    ) -> int:
        anchored = self._anchor(records)
        if anchored is None:
            return self.request_tokens(messages, system, tools)
        used, since = anchored
        return used + sum(estimate_json(record.get("content")) for record in since)

    def request_tokens(
        self, messages: Sequence[Any], system: str | None, tools: Sequence[Any]
    ) -> int:
        """`estimate_request` of the session's current history, at a cost that does
        not grow with it (the usage estimate of a reply that reported none asks for
        it after every model response)."""
        size, images = self._measure_history(messages)
        return (
            -(-size // CHARS_PER_TOKEN)
            + images * IMAGE_TOKENS
            + estimate_text(system or "")
            + self._tool_tokens(tools)
        )

    def _tool_tokens(self, tools: Sequence[Any]) -> int:
        """``estimate_json(_specs(tools))``, measured again only for other tools."""
        if tools is not self._tools:
            self._tools_tokens = estimate_json(_specs(tools))
            self._tools = tools
        return self._tools_tokens

    def _anchor(self, records: Sequence[Record]) -> tuple[int, list[Record]] | None:
        """`_anchor` of ``records``."""
        self._scan(records)
        excluded, replaced = self._excluded, self._replaced
        for position in reversed(self._candidates):
            record = records[position]
            if record.get("turn") in excluded or record.get("turn") in replaced:
                continue
            usage = record["usage"]
            used = _count(usage.get("input_tokens")) + _count(usage.get("output_tokens"))
            since = [
                later
                for later in reversed(records[position + 1 :])
                if later.get("type") in SURFACE_TYPES
                and later.get("turn") not in excluded
                and (later.get("type") == "user/message" or later.get("turn") not in replaced)
            ]
            return used, since
        return None

    def _scan(self, records: Sequence[Record]) -> None:
        if records is not self._records or len(records) < self._scanned:
            self._records = records
            self._scanned = 0
            self._excluded, self._replaced, self._candidates = _NONE, _NONE, []
        first, end = self._scanned, len(records)
        if first == end:
            return
        self._scanned = end
        # One pass over the new records, each looked at by its type (a turn
        # adds a few, and most are of a type none of the three cares about).
        left_out: set[int] = set()
        regenerates = False
        for position in range(first, end):
            record = records[position]
            kind = record.get("type")
            if kind == "assistant/message":
                usage = record.get("usage")
                if isinstance(usage, Mapping) and _count(usage.get("input_tokens")):
                    self._candidates.append(position)
            elif kind == "turn/end":
                if leaves_out(record):
                    left_out.add(record["turn"])
            elif kind == "turn/start":
                regenerates = regenerates or "regenerates" in record
            elif kind == "compaction" and completed_compaction(record):
                self._candidates = []
        if left_out:
            self._excluded = self._excluded | left_out
        if regenerates:
            self._replaced = replaced_turns(records) or _NONE

    def _measure_history(self, messages: Sequence[Any]) -> tuple[int, int]:
        """`_measure` of ``list(messages)``, from the sizes of its messages."""
        parts = getattr(messages, "parts", None)
        stable: Sequence[Any] = ()
        count = 0
        if parts is None:
            window: Sequence[Any] = list(messages)
        else:
            stable, count, window = parts()
            if stable is not self._stable:
                self._stable, self._sizes, self._totals = stable, [], (0, 0)
        sizes = self._sizes
        if len(sizes) < count:
            size, images = self._totals
            for message in stable[len(sizes) : count]:
                measured = _measure(message)
                sizes.append(measured)
                size += measured[0]
                images += measured[1]
            self._totals = (size, images)
        if len(sizes) == count:
            size, images = self._totals
        else:  # an older view than the last one: fewer stable messages
            size = sum(nbytes for nbytes, _ in sizes[:count])
            images = sum(nimages for _, nimages in sizes[:count])
        for message in window:
            nbytes, nimages = _measure(message)
            size += nbytes
            images += nimages
        # The brackets and the commas of the list.
        return size + 2 + max(count + len(window) - 1, 0), images


def _specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "schema": t.input_schema} for t in tools]
