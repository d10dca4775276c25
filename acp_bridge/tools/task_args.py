"""The argument model of ``task`` (`acp_bridge.tools.subagent`), loaded when first used."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["TaskArgs"]


class TaskArgs(BaseModel):
    description: str = Field(description="A short title of the task (a few words)")
    prompt: str = Field(
        description="The whole task, self-contained: the subagent sees nothing else of this "
        "conversation"
    )
