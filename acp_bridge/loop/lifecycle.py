"""The rules of a turn's life: its settings, its states, the legal moves, its endings.

Everything that decides which state a turn may move to lives in this table;
`acp_bridge.loop.turn.Turn._enter` is the one place that applies it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from ..log.records import StopReason

__all__ = ["TRANSITIONS", "Ending", "IllegalTransition", "TurnConfig", "TurnState"]


@dataclass(frozen=True, slots=True)
class TurnConfig:
    max_steps: int = 25
    cancel_deadline: float = 5.0
    idle_timeout: float | None = 300.0
    # Longest a tool call may run before it is stopped (seconds).
    tool_timeout: float = 300.0
    # Secret-looking variables let through to commands and not redacted
    # from tool results (--pass-env, ACP_BRIDGE_PASS_ENV).
    pass_env: tuple[str, ...] = ()
    # How deep subagent sessions nest (0: no task tool) and how many run at
    # once in the process (--subagent-depth, --subagents-at-once).
    subagent_depth: int = 1
    subagents_at_once: int = 4


class TurnState(enum.Enum):
    STARTING = "starting"
    COMPACTING = "compacting"
    STREAMING = "streaming"
    RUNNING_TOOLS = "running_tools"
    AWAITING_EDITOR = "awaiting_editor"
    SETTLING = "settling"
    ENDED = "ended"


S = TurnState
# The legal transitions; `Turn._enter` refuses any other (a bug, recorded as internal).
TRANSITIONS: Final[dict[TurnState, frozenset[TurnState]]] = {
    S.STARTING: frozenset({S.STREAMING, S.COMPACTING, S.SETTLING, S.ENDED}),
    S.COMPACTING: frozenset({S.STREAMING, S.SETTLING, S.ENDED}),
    S.STREAMING: frozenset({S.RUNNING_TOOLS, S.COMPACTING, S.SETTLING, S.ENDED}),
    S.RUNNING_TOOLS: frozenset({S.STREAMING, S.COMPACTING, S.AWAITING_EDITOR, S.SETTLING, S.ENDED}),
    S.AWAITING_EDITOR: frozenset({S.RUNNING_TOOLS, S.SETTLING, S.ENDED}),
    S.SETTLING: frozenset({S.ENDED}),
    S.ENDED: frozenset(),
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ends.  ``how``: finished, stopped, failed or internal."""

    how: str
    reason: StopReason | None = None  # finished: the ACP stop reason
    error: BaseException | None = None  # failed: a ProviderError; internal: the bug
    forced: bool = False
