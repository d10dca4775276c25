"""Assemble provider-neutral stream events into history blocks.

`StreamAssembler` is pure and synchronous: it is fed the events of one model
stream, in order, and offers views of what has arrived so far.  It does no
I/O, so the loop can call it on every delta and a test can drive it directly.

Blocks are keyed by the event ``index`` and kept in first-seen order.  A text
or reasoning block opens with its first delta; a tool call opens with
`ToolCallStart`.  A block closes with `BlockEnd`, and every block closes at
the end of the stream: when `Finish` arrives, or when the caller says the
stream ended without one (`end_stream`).  After that only `Usage` is accepted
(some providers report usage last).  `BlockEnd` for an index never seen is accepted and
reserves that index as an empty, closed block (an empty text block on the
wire), so a later delta to it is an error.

The hot path is `feed` with a `TextDelta` to an open text block: one dict
lookup and one list append.  Fragments are joined only when a view is asked
for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from acp_bridge.json_depth import MAX_DEPTH, too_deep
from acp_bridge.providers.base import (
    BlockEnd,
    Finish,
    FinishReason,
    ReasoningDelta,
    ReasoningSignature,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)

__all__ = ["AssemblyError", "StreamAssembler"]

TEXT: Final = "text"
REASONING: Final = "reasoning"
TOOL_CALL: Final = "tool_call"
# A BlockEnd for an index that never had content.
EMPTY: Final = "empty"


class AssemblyError(Exception):
    """The event stream breaks the seam's rules (a provider protocol error)."""


class _Block:
    __slots__ = ("closed", "id", "joined", "kind", "name", "parts", "signature")

    def __init__(self, kind: str, id: str = "", name: str = "") -> None:
        self.kind = kind
        # Fragments in arrival order.  The list object never changes (the
        # assembler holds its bound ``append``); joins happen in place.
        self.parts: list[str] = []
        # How many leading entries of ``parts`` are already joined segments.
        self.joined = 0
        self.closed = False
        self.id = id
        self.name = name
        self.signature = ""

    def text(self) -> str:
        parts = self.parts
        if len(parts) != 1:
            # Keep the join: views may be asked for more than once.
            parts[:] = ["".join(parts)]
            self.joined = 1
        return parts[0] if parts else ""

    def ends_with(self, fragments: list[str]) -> bool:
        k = len(fragments)
        return (
            not k
            or self.parts[-k:] == fragments  # not joined since: the same string objects
            or self.text().endswith("".join(fragments))
        )

    def drop_tail(self, fragments: list[str]) -> None:
        """Take the last ``fragments`` back (`ends_with` holds)."""
        parts, k = self.parts, len(fragments)
        if not k:
            return
        if parts[-k:] == fragments:
            del parts[-k:]
            self.joined = min(self.joined, len(parts))
            return
        text = self.text()
        parts[:] = [text[: len(text) - sum(map(len, fragments))]]

    def compact(self) -> None:
        """Join the fragments that arrived since the last call into one segment."""
        parts, k = self.parts, self.joined
        if len(parts) - k > 1:
            parts[k:] = ["".join(parts[k:])]
        self.joined = len(parts)

    def tool_call(self) -> dict[str, Any]:
        args = self.text()
        if not args.strip():
            value: object = {}
        else:
            try:
                value = orjson.loads(args)
            except orjson.JSONDecodeError as exc:
                raise AssemblyError(
                    f"tool call {self.id!r} ({self.name}): arguments are not valid JSON: {exc}"
                ) from None
            if not isinstance(value, dict):
                raise AssemblyError(
                    f"tool call {self.id!r} ({self.name}): arguments are not a JSON object"
                )
            if too_deep(value, MAX_DEPTH) is not None:
                # The same bound as for the editor's frames: deeper, the log
                # could not record it.
                raise AssemblyError(
                    f"tool call {self.id!r} ({self.name}): arguments nest deeper than "
                    f"{MAX_DEPTH} levels"
                )
            if _LONG_NUMBER.search(args) and _has_huge_int(json.loads(args)):
                # orjson would read it as a float, silently changing the value,
                # and the log could not record it: refuse it as malformed.
                raise AssemblyError(
                    f"tool call {self.id!r} ({self.name}): arguments hold an integer "
                    "outside the 64-bit range"
                )
        return {"type": TOOL_CALL, "id": self.id, "name": self.name, "input": value}


# A run of digits long enough to be outside the 64-bit integer range.
_LONG_NUMBER: Final = re.compile(r"\d{19,}")


def _has_huge_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -(2**63) <= value < 2**64
    if isinstance(value, dict):
        return any(_has_huge_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_huge_int(v) for v in value)
    return False


class StreamAssembler:
    """Accumulates one model stream.  See the module docstring for the rules."""

    __slots__ = (
        "_blocks",
        "_ended",
        "_open_args",
        "_open_reasoning",
        "_open_text",
        "finish",
        "usage",
    )

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        # index -> parts.append of each open block, by kind: the fast path.
        self._open_text: dict[int, Callable[[str], None]] = {}
        self._open_reasoning: dict[int, Callable[[str], None]] = {}
        self._open_args: dict[int, Callable[[str], None]] = {}
        self.finish: FinishReason | None = None
        self.usage: Usage | None = None
        self._ended = False

    # -- feeding -----------------------------------------------------------

    def feed(self, event: StreamEvent) -> None:
        """Take the next event of the stream; raise `AssemblyError` if it is illegal."""
        if type(event) is TextDelta:
            append = self._open_text.get(event.index)
            if append is None:
                append = self._open_delta(event.index, TEXT, self._open_text)
            append(event.text)
        elif type(event) is ReasoningDelta:
            append = self._open_reasoning.get(event.index)
            if append is None:
                append = self._open_delta(event.index, REASONING, self._open_reasoning)
            append(event.text)
        elif type(event) is ToolCallDelta:
            append = self._open_args.get(event.index)
            if append is None:
                append = self._open_delta(event.index, TOOL_CALL, self._open_args)
            append(event.args)
        elif type(event) is BlockEnd:
            self._end_block(event.index)
        elif type(event) is ToolCallStart:
            self._start_tool_call(event)
        elif type(event) is Usage:
            self.usage = event
        elif type(event) is ReasoningSignature:
            block = self._blocks.get(event.index)
            if block is None or block.kind != REASONING:
                raise AssemblyError(f"reasoning signature for index {event.index}, not reasoning")
            block.signature = event.signature
        elif type(event) is Finish:
            self._finish(event.reason)
        else:
            raise AssemblyError(f"not a stream event: {event!r}")

    def _open_delta(
        self, index: int, kind: str, open_blocks: dict[int, Callable[[str], None]]
    ) -> Callable[[str], None]:
        """The slow path of a delta: open a new block, or explain why not."""
        self._check_not_ended(kind)
        block = self._blocks.get(index)
        if block is None:
            if kind == TOOL_CALL:
                raise AssemblyError(f"tool call arguments for index {index} before its start")
            block = self._blocks[index] = _Block(kind)
        elif block.kind != kind and block.kind != EMPTY:
            raise AssemblyError(f"{kind} delta to index {index}, which is a {block.kind} block")
        else:
            raise AssemblyError(f"{kind} delta to closed block {index}")
        append = open_blocks[index] = block.parts.append
        return append

    def _start_tool_call(self, event: ToolCallStart) -> None:
        self._check_not_ended("tool call start")
        existing = self._blocks.get(event.index)
        if existing is not None:
            raise AssemblyError(
                f"tool call start at index {event.index}, which is already a {existing.kind} block"
            )
        block = self._blocks[event.index] = _Block(TOOL_CALL, event.id, event.name)
        self._open_args[event.index] = block.parts.append

    def _end_block(self, index: int) -> None:
        block = self._blocks.get(index)
        if block is None:
            self._check_not_ended("block end")
            block = self._blocks[index] = _Block(EMPTY)
        block.closed = True
        self._open_text.pop(index, None)
        self._open_reasoning.pop(index, None)
        self._open_args.pop(index, None)

    def _finish(self, reason: FinishReason) -> None:
        self._check_not_ended("finish")
        self.finish = reason
        self.end_stream()

    def end_stream(self) -> None:
        """The stream ended (with or without `Finish`): close every block.

        Call it when the provider's iterator is exhausted, so that tool calls
        the provider never closed with `BlockEnd` count as complete.
        """
        self._ended = True
        for block in self._blocks.values():
            block.closed = True
        self._open_text.clear()
        self._open_reasoning.clear()
        self._open_args.clear()

    def _check_not_ended(self, what: str) -> None:
        if self._ended:
            raise AssemblyError(f"{what} after the end of the stream")

    # -- views -------------------------------------------------------------

    def blocks(self) -> list[dict[str, Any]]:
        """The complete reply of a normally finished stream, as HistoryBlocks.

        Whitespace-only text and reasoning blocks are left out.  A tool call's
        ``input`` is its parsed arguments (``{}`` when none were streamed);
        arguments that are not a JSON object raise `AssemblyError`.
        """
        out: list[dict[str, Any]] = []
        for block in self._blocks.values():
            if block.kind == TOOL_CALL:
                out.append(block.tool_call())
            elif block.kind != EMPTY:
                text = block.text()
                if text and not text.isspace():
                    item = {"type": block.kind, "text": text}
                    if block.signature:
                        item["signature"] = block.signature
                    out.append(item)
        return out

    def compact(self) -> None:
        """Join the fragments of open text and reasoning blocks received so far.

        Cheap to call once per write to the editor; it keeps a long stream's
        views (`interrupted_blocks` on a stop) from joining thousands of
        fragments at the moment the user is waiting for the answer.
        """
        for block in self._blocks.values():
            if not block.closed and (block.kind == TEXT or block.kind == REASONING):
                block.compact()

    def can_retract(self, tails: Mapping[int, list[str]]) -> bool:
        """Whether each text or reasoning block ``index`` of ``tails`` ends with
        the fragments given for it (see `retract`)."""
        for index, fragments in tails.items():
            block = self._blocks.get(index)
            if block is None or (block.kind != TEXT and block.kind != REASONING):
                return False
            if not block.ends_with(fragments):
                return False
        return True

    def retract(self, tails: Mapping[int, list[str]]) -> None:
        """The last fragments fed to each block (``tails``: block index ->
        fragments, in the order they came) never reached the editor: forget
        them (a stop keeps what it saw).  All or nothing: `AssemblyError`,
        and nothing changed, unless `can_retract`."""
        if not self.can_retract(tails):
            raise AssemblyError(f"cannot take back {tails!r}: not what the blocks end with")
        for index, fragments in tails.items():
            self._blocks[index].drop_tail(fragments)

    def interrupted_blocks(self) -> list[dict[str, Any]]:
        """What survives a user stop: text and reasoning blocks, open or closed,
        with non-whitespace content, in stream order.  No tool calls: a stop
        comes before dispatch, so none of them will run."""
        out: list[dict[str, Any]] = []
        for block in self._blocks.values():
            if block.kind == TEXT or block.kind == REASONING:
                text = block.text()
                if text and not text.isspace():
                    out.append({"type": block.kind, "text": text})
        return out

    def completed_tool_calls(self) -> list[dict[str, Any]]:
        """Closed tool calls (`BlockEnd` seen, or the stream ended), in stream order."""
        return [b.tool_call() for b in self._blocks.values() if b.kind == TOOL_CALL and b.closed]
