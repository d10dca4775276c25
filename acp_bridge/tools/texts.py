"""What the model is told about a tool it cannot use (no imports: the turn needs it cheaply)."""

from __future__ import annotations


def unavailable_tool_text(name: str) -> str:
    return f"Tool {name!r} is not available in this session. Continue without it."
