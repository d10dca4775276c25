"""The rules of a turn's life: its settings, its kind, its states, the legal moves, its endings.

Everything that decides which state a turn may move to lives in this table;
`acp_bridge.loop.turn.Turn._enter` is the one place that applies it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..log.records import StopReason

# A slash command's work, given its `acp_bridge.loop.turn.Turn` (not named
# here: the turn is built on these rules, never the other way round).
Answer = Callable[[Any], Awaitable[StopReason]]

__all__ = ["TRANSITIONS", "Ending", "IllegalTransition", "TurnConfig", "TurnKind", "TurnState"]


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


@dataclass(frozen=True, slots=True)
class TurnKind:
    """What a turn is, fixed when it is built: one of the four constructors below.

    Its differences are data: ``start``, the fields of its ``turn/start``;
    ``message``, the fields of its ``user/message`` (a prompt only: the blocks
    for the model history, and the ACP blocks exactly as the editor sent
    them); ``instructions``, what a ``/compact`` tells the summary; ``answer``,
    the work of a slash command, run by the turn in place of model requests.
    A regenerate, a ``/compact`` and a slash command keep the command's blocks
    in ``turn/start.prompt`` (a replay shows them as the user's message).
    """

    name: Literal["prompt", "regenerate", "compact", "command"]
    start: dict[str, Any]
    message: dict[str, Any] | None = None
    instructions: str | None = None
    answer: Answer | None = None

    @classmethod
    def prompt(
        cls, blocks: list[dict[str, Any]], raw: list[dict[str, Any]] | None = None
    ) -> TurnKind:
        """A prompt: ``blocks`` for the model, ``raw`` as received (default: the same)."""
        return cls("prompt", {}, {"content": blocks, "prompt": blocks if raw is None else raw})

    @classmethod
    def regenerate(cls, target: int, command: list[dict[str, Any]] | None) -> TurnKind:
        """A new reply to the user turn ``target`` (`acp_bridge.stored.regenerate`)."""
        start: dict[str, Any] = {"regenerates": target}
        if command is not None:
            start["prompt"] = command
        return cls("regenerate", start)

    @classmethod
    def compact(cls, command: list[dict[str, Any]], instructions: str | None) -> TurnKind:
        """``/compact [instructions]`` (see `acp_bridge.commands`)."""
        start = {"command": "compact", "prompt": command}
        return cls("compact", start, instructions=instructions or None)

    @classmethod
    def command(
        cls,
        name: str,
        command: list[dict[str, Any]],
        answer: Answer,
    ) -> TurnKind:
        """A slash command (`acp_bridge.acp.command_turns`): ``answer`` does its work."""
        return cls("command", {"command": name, "prompt": command}, answer=answer)


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
