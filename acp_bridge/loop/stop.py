"""Mapping a step's outcome onto the ACP stop reason of the turn."""

from __future__ import annotations

from typing import Final

from ..log.records import StopReason

# Provider finish reason -> ACP stop reason, for finishes that end the turn.
FINISH_TO_STOP: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}

ACP_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)


def stop_reason_for_finish(finish: str | None) -> StopReason | None:
    """The ACP stop reason a finish ends the turn with, or None to go on (tool use)."""
    if finish == "tool_use":
        return None
    return FINISH_TO_STOP.get(finish or "end_turn", "end_turn")
