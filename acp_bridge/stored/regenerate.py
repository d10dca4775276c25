"""Regenerate: a new attempt at the reply to the last user turn.

A regenerate is a turn of its own whose ``turn/start`` names the user turn it
answers again (``regenerates``) and that has no user message: the replies it
replaces stay in the log, and `acp_bridge.log.derive.derive_messages` leaves
them out of the model history (see `replaced_turns`).  Started by the
``/regenerate`` command (a prompt whose only text is that command, see
`acp_bridge.commands.catalog.parse`; the command is kept in
``turn/start.prompt`` so a replay shows it) or by the
``_acp-bridge/regenerate`` extension method; its turn is
`acp_bridge.loop.lifecycle.TurnKind.regenerate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["target_turn"]


def target_turn(records: Sequence[Mapping[str, Any]]) -> int | None:
    """The user turn a regenerate answers again: the last one with a user message."""
    for record in reversed(records):
        if record.get("type") == "turn/start" and record.get("command") == "clear":
            return None  # the conversation was cleared since
        if record.get("type") == "user/message" and isinstance(record.get("turn"), int):
            turn: int = record["turn"]
            return turn
    return None
