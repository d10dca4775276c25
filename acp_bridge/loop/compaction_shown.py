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
    for update in compaction_updates(record, opted=turn.session.context.compaction_updates):
        turn.emit(update)
