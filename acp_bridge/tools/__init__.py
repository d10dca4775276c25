"""Tools the model can call, run through the editor (see `acp_bridge.tools.base`)."""

from .base import ClientCapabilities, Tool, ToolContext, ToolError, ToolKind, ToolOutput
from .registry import TOOLS, ToolRegistry

__all__ = [
    "TOOLS",
    "ClientCapabilities",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolOutput",
    "ToolRegistry",
]
