"""Tools the model can call, run through the editor (see `acp_bridge.tools.base`)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import ClientCapabilities, Tool, ToolContext, ToolError, ToolKind, ToolOutput
    from .registry import TOOLS, ToolRegistry

# Loaded on first use.  The built-in tools' argument models (pydantic, which
# costs more than the rest of start-up) load later still, at a turn's first
# use of them.
_WHERE = {
    "TOOLS": ".registry",
    "ToolRegistry": ".registry",
    "ClientCapabilities": ".base",
    "Tool": ".base",
    "ToolContext": ".base",
    "ToolError": ".base",
    "ToolKind": ".base",
    "ToolOutput": ".base",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(where, __name__), name)


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
