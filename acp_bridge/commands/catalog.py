"""The slash commands a session offers, and how a prompt names one (`parse`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..update_builders import available_commands_update

if TYPE_CHECKING:
    from ..loop.session import Session

__all__ = [
    "COMMANDS",
    "announce",
    "parse",
]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    # The input hint, for a command that takes words after its name.
    hint: str | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.hint is not None:
            out["input"] = {"hint": self.hint}
        return out


COMMANDS: Final = (
    Command("regenerate", "Answer your last message again (the previous reply stays in the log)"),
    Command(
        "compact",
        "Summarize the conversation so far, to free the model's context window",
        "what the summary should keep (optional)",
    ),
    Command("model", "Show the model, or switch to another one", "model name (optional)"),
    Command(
        "mode", "Show the mode, or switch it (ask, accept_edits, read_only)", "mode id (optional)"
    ),
    Command("status", "Model, mode, context used, session id and log file"),
    Command(
        "clear",
        "Start a new conversation in this session (the earlier turns stay in the log)",
    ),
    Command("help", "List the commands"),
)
BY_NAME: Final = {c.name: c for c in COMMANDS}


def announce(session: Session) -> None:
    """Send the session's commands (a session was opened or loaded): the same for all."""
    update = available_commands_update([c.wire() for c in COMMANDS])
    session.outbox.send(session.frames.update(update))


def parse(blocks: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """``(name, argument)`` for a prompt that is one of the `COMMANDS`, else
    None (an unknown ``/word`` is text for the model, and so is
    ``/regenerate`` with words after it).

    The prompt is one text block starting with ``/name``; the argument is
    the rest, its whitespace collapsed, except ``/compact``'s instructions
    for the summary, which keep theirs.
    """
    if len(blocks) != 1 or blocks[0].get("type") != "text":
        return None
    text = str(blocks[0].get("text", "")).strip()
    if not text.startswith("/"):
        return None
    head, _, rest = text[1:].partition(" ")
    name, _, tail = head.partition("\n")
    if name not in BY_NAME or (name == "regenerate" and text != "/regenerate"):
        return None
    if name == "compact":
        return name, (tail + " " + rest).strip() if tail else rest.strip()
    return name, " ".join((tail + " " + rest).split())
