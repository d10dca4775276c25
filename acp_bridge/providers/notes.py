"""The words the model reads about a Stop (seed 003: what the user saw is what the model sees).

An interrupted assistant message is sent back with exactly the text the user
saw.  The user message that follows it then starts with `INTERRUPTED_NOTE`,
so the model knows the reply was cut there by the user (not finished), that
nothing after that point was shown, and that a tool call it may have begun
was dropped without running: it neither repeats the reply nor blindly
continues or re-issues the call.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["INTERRUPTED_NOTE", "resource_text"]

INTERRUPTED_NOTE: Final = (
    "[The user pressed Stop while your previous reply was streaming. They saw it only up to "
    "the point where it ends; nothing after that was shown, and any tool call you had "
    "started in it was discarded without running.]"
)


def resource_text(block: dict[str, Any]) -> str | None:
    """A text rendering of an embedded resource or a resource link (None: not text)."""
    if block["type"] == "resource_link":
        name = block.get("title") or block.get("name") or ""
        return f"[Resource: {name} <{block['uri']}>]"
    if "text" in block:
        return f'<resource uri="{block["uri"]}">\n{block["text"]}\n</resource>'
    mime = block.get("mimeType") or "binary data"
    return f"[Attached resource {block['uri']} ({mime}) is not text and was not included]"
