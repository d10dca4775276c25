"""A session: its event log, its provider, and at most one running turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..log.writer import SessionLog
from ..providers.base import Provider
from ..transport.outbox import Outbox
from .turn import Turn
from .updates import UpdateFrames


@dataclass(eq=False)
class Session:
    id: str
    cwd: str
    log: SessionLog
    provider: Provider
    outbox: Outbox
    frames: UpdateFrames
    # Prompts for one session run one at a time; a second prompt waits for
    # the running turn to settle (an editor that sends a new message usually
    # sends session/cancel first).
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    turns: int = 0
    active: Turn | None = None
    # Prompts received but not started yet (waiting for their handler or for
    # the running turn), by request id; True once a cancel has covered them.
    waiting: dict[object, bool] = field(default_factory=dict)

    def history(self) -> Sequence[dict[str, Any]]:
        """The model history: ``derive_messages`` of the log (invariant I4), kept
        incrementally; an immutable view whose messages must not be mutated."""
        return self.log.history.messages()
