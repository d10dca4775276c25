"""The words the model reads about a reply cut short (seed 003: what the user
saw is what the model sees).

An interrupted assistant message is sent back with exactly the text the user
saw.  The user message that follows it then starts with a note, so the model
knows the reply was cut there (not finished), that nothing after that point
was shown, and that a tool call it may have begun was dropped without
running: it neither repeats the reply nor blindly continues or re-issues the
call.  The note says who cut it, as the log does: `INTERRUPTED_NOTE` after a
user's Stop, `CRASHED_NOTE` after a reply that crash recovery closed (the
agent stopped unexpectedly; the user did not press Stop).  `stop_note` picks
it from the history message (see `acp_bridge.providers.sent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["CRASHED_NOTE", "INTERRUPTED_NOTE", "resource_text", "stop_note"]

INTERRUPTED_NOTE: Final = (
    "[The user pressed Stop while your previous reply was streaming. They saw it only up to "
    "the point where it ends; nothing after that was shown, and any tool call you had "
    "started in it was discarded without running.]"
)
CRASHED_NOTE: Final = (
    "[The agent stopped unexpectedly while your previous reply was streaming; the user did "
    "not stop it. They saw it only up to the point where it ends; nothing after that was "
    "shown, and any tool call you had started in it was discarded without running.]"
)


def stop_note(message: Mapping[str, Any]) -> str | None:
    """The note after an assistant history message: None unless it was interrupted."""
    if message.get("interrupted") is not True:
        return None
    return CRASHED_NOTE if message.get("crashed") is True else INTERRUPTED_NOTE


def resource_text(block: dict[str, Any]) -> str | None:
    """A text rendering of an embedded resource or a resource link (None: not text)."""
    if block["type"] == "resource_link":
        name = block.get("title") or block.get("name") or ""
        return f"[Resource: {name} <{block['uri']}>]"
    if "text" in block:
        return f'<resource uri="{block["uri"]}">\n{block["text"]}\n</resource>'
    mime = block.get("mimeType") or "binary data"
    return f"[Attached resource {block['uri']} ({mime}) is not text and was not included]"
