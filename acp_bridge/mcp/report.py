"""Telling the user about an MCP server: one function, so the way can change in one place.

For now a server's failure (or late join) is an ``agent_thought_chunk`` of
its own (not part of any model message, not logged, not replayed: like a
notice, it is live only) and a line on stderr.  It is never sent while a
model stream is open (it would mix into the streamed reasoning: then it
waits for the turn's end) nor before the answer to the request that opened
the session: `Reporter` holds it until then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..loop.session import Session

__all__ = ["Reporter", "thought_update"]

log = logging.getLogger("acp_bridge.mcp")

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


def thought_update(text: str) -> dict[str, object]:
    return {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}


class Reporter:
    """What a session's user is told about its MCP servers, held until it can be sent."""

    def __init__(self, session: Session, spawn: Spawn) -> None:
        self.session = session
        self.spawn = spawn
        self.held: list[str] = []
        # False until the request that opened the session is answered.
        self.open = False
        self.gone = False

    def __call__(self, severity: str, text: str) -> None:
        if severity == "error":
            log.warning("session %s: %s", self.session.id, text)
        else:
            log.info("session %s: %s", self.session.id, text)
        self.held.append(text)
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
        for text in held:
            self.session.outbox.send(self.session.frames.update(thought_update(text + "\n")))
