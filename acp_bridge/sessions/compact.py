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

__all__ = ["COMMAND", "instructions_of"]

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
