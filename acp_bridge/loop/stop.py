"""Mapping a step's outcome onto the stop reason of the turn (what its
``turn/end`` records; the connection's dialect puts it on the wire,
`acp_bridge.protocol`)."""

from __future__ import annotations

from typing import Final, Literal

# Provider finish reason -> ACP stop reason, for finishes that end the turn.
# The stop reasons a finish gives: both an ACP stop reason and a step/end reason.
FinishStop = Literal["end_turn", "max_tokens", "refusal"]

FINISH_TO_STOP: Final[dict[str, FinishStop]] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


def stop_reason_for_finish(finish: str | None) -> FinishStop | None:
    """The ACP stop reason a finish ends the turn with, or None to go on (tool use)."""
    if finish == "tool_use":
        return None
    return FINISH_TO_STOP.get(finish or "end_turn", "end_turn")
