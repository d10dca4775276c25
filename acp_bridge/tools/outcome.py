"""What a tool call comes to: its output, or an error the model reads.

A module of its own (`acp_bridge.tools.base` names both) so that the
workspaces (`acp_bridge.tools.workspace`) can give results without importing
the tool interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ToolError(Exception):
    """A tool failed in a way the model should read (its message is the result)."""


@dataclass
class ToolOutput:
    """A tool's result.  ``text`` goes back to the model; ``content`` is extra
    ACP tool-call content for the editor (a diff, a terminal); ``raw_output``
    is the ``rawOutput`` of the final update."""

    text: str
    is_error: bool = False
    content: list[dict[str, Any]] = field(default_factory=list)
    raw_output: dict[str, Any] | None = None
