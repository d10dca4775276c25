"""The ``usage_update`` of a step: what the provider counted, or an estimate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..providers.base import Usage
from ..update_builders import usage_update
from .recorder import TurnRecorder
from .session_core import SessionCore

if TYPE_CHECKING:
    # Loads off the start-up path (see `acp_bridge.server`); it does not import the loop.
    from ..context.windows import ModelInfo

__all__ = ["UsageTurn", "estimate_usage", "report_usage", "show_usage"]


class UsageTurn(Protocol):
    usage_shown: bool

    @property
    def session(self) -> SessionCore: ...

    @property
    def rec(self) -> TurnRecorder: ...

    @property
    def info(self) -> ModelInfo | None: ...

    @property
    def system(self) -> str | None: ...

    def emit(self, update: dict[str, Any]) -> None: ...


def report_usage(turn: UsageTurn, usage: Usage) -> None:
    """A usage_update from what the provider counted for this request and its answer
    (never a sum over requests), with the session's window and cost so far."""
    context = turn.session.context
    if usage.context_window:
        context.reported_window = usage.context_window
    show_usage(turn, usage.input_tokens, usage.output_tokens)


def estimate_usage(turn: UsageTurn, content: list[dict[str, Any]]) -> None:
    """A response without a usage report: estimate it (real models only)."""
    info = turn.info
    if info is None or not info.estimate_usage:
        return
    from ..context.estimate import estimate_json  # off the start-up path

    session = turn.session
    tools = session.tools.registry.specs()
    # The session's incremental estimate: measuring the whole history again
    # after every reply grew with the session (milliseconds late in a long one).
    sent = session.context.estimate.request_tokens(session.history(), turn.system, tools)
    show_usage(turn, sent, estimate_json(content))


def show_usage(
    turn: UsageTurn,
    input_tokens: int,
    output_tokens: int,
    *,
    used: int | None = None,
    step: bool = True,
) -> None:
    info = turn.info
    if info is None:
        return
    context = turn.session.context
    if used is None:
        used = input_tokens + output_tokens
    size = context.window(info)
    extra = context.add_cost(info, input_tokens, output_tokens)
    turn.rec.usage_update(used, size, step=step, **extra)
    turn.emit(usage_update(used, size, extra))
    turn.usage_shown = True
