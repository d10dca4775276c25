"""A session as its turns see it: its log, provider, writer, tools and context.

`acp_bridge.loop.session.Session` adds the prompt queue on top; the turn and
the compaction depend only on this part, so the imports point one way
(session -> prompts -> turn -> session_core).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..log.writer import SessionLog
from ..providers.base import Provider
from .output import SessionFrames, TurnOutput

if TYPE_CHECKING:
    from ..context.state import SessionContext
    from ..tools.state import ToolState

__all__ = ["SessionCore"]


@dataclass(eq=False)
class SessionCore:
    id: str
    cwd: str
    log: SessionLog
    provider: Provider
    outbox: TurnOutput
    # Its updates' frames, in the connection's dialect (`acp_bridge.protocol`).
    frames: SessionFrames
    # Tools, mode, permissions and the workspace they act on (the agent gives
    # them, `acp_bridge.acp.tool_setup.tool_state`; a session made without
    # them offers no tool, and a call is answered "unavailable").
    tools: ToolState = field(default=cast("ToolState", None), kw_only=True)
    # Its system prompt, window and cost (the agent sets its directories and
    # the client's capabilities; see `acp_bridge.acp.agent.Agent.make_session`).
    context: SessionContext = field(init=False)

    def __post_init__(self) -> None:
        # Loaded off the start-up path (see `acp_bridge.server`).
        from ..context.config import ContextConfig
        from ..context.state import SessionContext

        self.context = SessionContext(self.provider.context or ContextConfig(), self.cwd)
        if self.tools is None:
            from ..tools.state import ToolState

            self.tools = ToolState.without_tools(self.id, self.cwd, self.log, self.send_update)

    def send_update(self, update: dict[str, Any]) -> None:
        """Send a ``session/update`` of this session (its tools' emit)."""
        self.outbox.send(self.frames.update(update))

    def history(self) -> Sequence[dict[str, Any]]:
        """The model history: ``derive_messages`` of the log (invariant I4), kept
        incrementally; an immutable view whose messages must not be mutated."""
        return self.log.history.messages()
