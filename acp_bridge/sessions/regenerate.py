"""Regenerate: a new attempt at the reply to the last user turn.

A regenerate is a turn of its own whose ``turn/start`` names the user turn it
answers again (``regenerates``) and that has no user message: the replies it
replaces stay in the log, and `acp_bridge.log.derive.derive_messages` leaves
them out of the model history (see `replaced_turns`).  Started by the
``/regenerate`` command (a prompt whose only text is that command; the
command is kept in ``turn/start.prompt`` so a replay shows it) or by the
``_acp-bridge/regenerate`` extension method.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["COMMAND", "is_command", "target_turn"]

COMMAND: Final = "regenerate"


def is_command(blocks: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a prompt is the ``/regenerate`` command (one text block, nothing else)."""
    return (
        len(blocks) == 1
        and blocks[0].get("type") == "text"
        and str(blocks[0].get("text", "")).strip() == "/" + COMMAND
    )


def target_turn(records: Sequence[Mapping[str, Any]]) -> int | None:
    """The user turn a regenerate answers again: the last one with a user message."""
    for record in reversed(records):
        if record.get("type") == "turn/start" and record.get("command") == "clear":
            return None  # the conversation was cleared since
        if record.get("type") == "user/message" and isinstance(record.get("turn"), int):
            turn: int = record["turn"]
            return turn
    return None
