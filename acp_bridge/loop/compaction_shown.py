"""A compaction as a turn holds it and shows it: the open one, and its updates.

Light on purpose (the ending needs it on every turn; the compaction itself,
`acp_bridge.loop.compact`, loads off the start-up path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..log.compaction import compaction_updates
from .session_core import SessionCore

__all__ = ["OpenCompaction", "Shows", "show"]


@dataclass
class OpenCompaction:
    """A compaction whose outcome is not logged yet (a Stop logs it cancelled)."""

    compaction_id: str
    attempt: str
    trigger: str


class Shows(Protocol):
    """A turn that can show the editor a compaction record."""

    @property
    def session(self) -> SessionCore: ...

    def emit(self, update: dict[str, Any]) -> None: ...


def show(turn: Shows, record: dict[str, Any]) -> None:
    """Send what the editor is shown of a compaction record."""
    from ..notices import notify, opted_in

    notices = opted_in(turn.session)
    for update in compaction_updates(record, opted=turn.session.context.compaction_updates):
        if notices and update["sessionUpdate"] == "agent_thought_chunk":
            # A client that takes notices is told of an automatic compaction,
            # or of a failed one, with a notice (live only).
            failed = record.get("status") == "failed"
            title = "Could not compact the conversation" if failed else "Context compacted"
            notify(turn.session, "error" if failed else "info", title, update["content"]["text"])
            continue
        turn.emit(update)
