"""A session: its event log, its provider, and its prompts (at most one running turn)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .prompts import PromptQueue
from .session_core import SessionCore

__all__ = ["Session"]


@dataclass(eq=False)
class Session(SessionCore):
    # Every prompt of the session, waiting or running (see PromptQueue).
    prompts: PromptQueue = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.prompts = PromptQueue(self)
