"""Telling the user about an MCP server: one function, so the way can change in one place.

A server's failure (or late join) is an ACP ``notice`` for a client that opted
in to notices, else an ``agent_thought_chunk`` of its own (`acp_bridge.notices.notify`;
not part of any model message, not logged, not replayed: live only), and a line
on stderr.  It is never sent while a model stream is open (a thought would mix
into the streamed reasoning: then it waits for the turn's end) nor before the
answer to the request that opened the session: `Reporter` holds it until then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..notices import Severity, notify

if TYPE_CHECKING:
    from ..loop.session import Session

__all__ = ["TITLES", "Reporter"]

log = logging.getLogger("acp_bridge.mcp")

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


TITLES: dict[Severity, str] = {
    "error": "An MCP server is not available",
    "warning": "MCP server",
    "info": "MCP server",
}


class Reporter:
    """What a session's user is told about its MCP servers, held until it can be sent."""

    def __init__(self, session: Session, spawn: Spawn) -> None:
        self.session = session
        self.spawn = spawn
        self.held: list[tuple[Severity, str]] = []
        # False until the request that opened the session is answered.
        self.open = False
        self.gone = False

    def __call__(self, severity: Severity, text: str) -> None:
        if severity == "error":
            log.warning("session %s: %s", self.session.id, text)
        else:
            log.info("session %s: %s", self.session.id, text)
        self.held.append((severity, text))
        self.flush()

    def flush(self) -> None:
        if not self.open or self.gone or not self.held:
            return
        turn = self.session.prompts.active
        if turn is not None and not turn.settled.is_set() and turn.stream is not None:
            # A model stream is open: its reasoning chunks must not mix with this.
            settled = turn.settled

            async def later() -> None:
                await settled.wait()  # the turn's answer is queued before this wakes
                self.flush()

            self.spawn(later)
            return
        held, self.held = self.held, []
        for severity, text in held:
            notify(self.session, severity, TITLES[severity], text)
