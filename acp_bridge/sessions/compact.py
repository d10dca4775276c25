"""The ``/compact [instructions]`` command: compact the conversation now.

A prompt whose only block is text starting with ``/compact`` runs a turn of
its own: its ``turn/start`` keeps the command (``command: "compact"``, and its
blocks in ``prompt``, which a replay shows as the user's message), it has no
user message and no model request but the summary's, and it answers
``end_turn`` with what was summarized and the tokens before and after, or
that there was nothing to compact (see `acp_bridge.loop.compact` and
`acp_bridge.log.compaction`).  Words after the command tell the summary what
to keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..log.writer import SessionLog
from ..loop.recorder import TurnRecorder

__all__ = ["COMMAND", "CompactRecorder", "instructions_of"]

COMMAND: Final = "compact"


def instructions_of(blocks: Sequence[Mapping[str, Any]]) -> str | None:
    """The instructions of a ``/compact`` prompt ("" for none), or None for another prompt."""
    if len(blocks) != 1 or blocks[0].get("type") != "text":
        return None
    text = str(blocks[0].get("text", "")).strip()
    word, _, rest = text.partition(" ")
    head, _, tail = word.partition("\n")
    if head != "/" + COMMAND:
        return None
    return (tail + " " + rest).strip() if tail else rest.strip()


class CompactRecorder(TurnRecorder):
    """A turn's recorder whose turn starts as a ``/compact`` (no user message)."""

    def __init__(self, slog: SessionLog, turn: int, command: list[dict[str, Any]]) -> None:
        super().__init__(slog, turn)
        self.command = command

    def turn_start(self, content: list[dict[str, Any]], prompt: list[dict[str, Any]]) -> None:
        if self.closed:
            return
        self.log.append("turn/start", self.turn, 0, command=COMMAND, prompt=self.command)
