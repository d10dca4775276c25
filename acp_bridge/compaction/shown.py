"""What the editor is shown of a compaction, live and on replay.

A compaction has two records (see `acp_bridge.log.records`): ``in_progress``,
then its outcome.  A client that advertised ``clientCapabilities.session.compaction``
gets ACP's ``compaction_update`` for each (the outcome with the summary as a
text block, or the error); any other client gets one thought chunk marked
``_meta.acpBridge.notice`` for the outcome (a notice, never reasoning: it does
not enter the model's history).  A ``/compact`` turn also answers with an
``agent_message_chunk`` saying what was summarized and the tokens before and
after (and the summary itself for a client that does not show compactions),
or that there was nothing to compact.

``session/load`` replays the outcome record only: a compaction keeps its place
in the timeline.  `compaction_updates` is a pure function of a record (the
replay, `acp_bridge.log.replay`, uses it); `show` sends them live through a
turn, which holds the compaction not yet logged as an `OpenCompaction`.

Light on purpose: the ending needs it on every turn, and the replay on every
load; running a compaction (`acp_bridge.compaction.run`) loads off the
start-up path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..update_builders import compaction_update, text_chunk

if TYPE_CHECKING:
    from ..loop.session_core import SessionCore

__all__ = [
    "OpenCompaction",
    "Shows",
    "compaction_updates",
    "nothing_to_compact_update",
    "opted_in",
    "show",
]

NOTHING_TO_COMPACT: Final = "Nothing to compact yet: there are no earlier messages to summarize."

Record = Mapping[str, Any]


def opted_in(client_capabilities: object) -> bool:
    """Whether ``initialize``'s client capabilities advertise ``session.compaction``."""
    if not isinstance(client_capabilities, Mapping):
        return False
    session = client_capabilities.get("session")
    return isinstance(session, Mapping) and isinstance(session.get("compaction"), Mapping)


def compaction_updates(record: Record, *, opted: bool, live: bool = True) -> list[dict[str, Any]]:
    """The ``session/update``s of one ``compaction`` record.

    ``live`` False (a replay) shows nothing for ``in_progress``: the outcome
    record carries the whole compaction.
    """
    status = record.get("status")
    compaction_id = str(record.get("compaction_id"))
    command = record.get("trigger") == "command"
    out: list[dict[str, Any]] = []
    if status == "in_progress":
        if opted and live:
            out.append(compaction_update(compaction_id, "in_progress"))
        return out
    if opted:
        out.append(_upsert(record, compaction_id))
    text = _outcome_text(record)
    if command:
        if status == "completed" and not opted:
            text += "\n\nSummary:\n\n" + str(record.get("summary", "")).strip()
        if text:
            out.append(_chunk("agent_message_chunk", text, compaction_id))
    elif text and not opted:
        out.append(_chunk("agent_thought_chunk", text, compaction_id))
    return out


def nothing_to_compact_update() -> dict[str, Any]:
    """The answer of a ``/compact`` with nothing to summarize."""
    return text_chunk("agent_message_chunk", NOTHING_TO_COMPACT, meta={"notice": True})


@dataclass
class OpenCompaction:
    """A compaction whose outcome is not logged yet (a Stop logs it cancelled)."""

    compaction_id: str
    attempt: str
    trigger: str


class Shows(Protocol):
    """A turn that can show the editor a compaction record."""

    @property
    def session(self) -> SessionCore: ...

    def emit(self, update: dict[str, Any]) -> None: ...


def show(turn: Shows, record: dict[str, Any]) -> None:
    """Send what the editor is shown of a compaction record."""
    from ..notices import notify

    notices = turn.session.context.notices
    for update in compaction_updates(record, opted=turn.session.context.compaction_updates):
        if notices and update["sessionUpdate"] == "agent_thought_chunk":
            # A client that takes notices is told of an automatic compaction,
            # or of a failed one, with a notice (live only).
            failed = record.get("status") == "failed"
            title = "Could not compact the conversation" if failed else "Context compacted"
            notify(turn.session, "error" if failed else "info", title, update["content"]["text"])
            continue
        turn.emit(update)


def _upsert(record: Record, compaction_id: str) -> dict[str, Any]:
    status = str(record.get("status"))
    update = compaction_update(compaction_id, status)
    if status == "completed":
        update["summary"] = [{"type": "text", "text": str(record.get("summary", ""))}]
    elif status == "failed":
        update["error"] = _error_message(record)
    return update


def _outcome_text(record: Record) -> str:
    status = record.get("status")
    trigger = record.get("trigger")
    if status == "completed":
        replaced = record.get("replaced", 0)
        before = _tokens(record.get("tokens_before"))
        after = _tokens(record.get("tokens_after"))
        what = "1 earlier message was" if replaced == 1 else f"{replaced} earlier messages were"
        lead = "Compacted the conversation" if trigger == "command" else "Context compacted"
        why = {
            "auto": " to keep it within the model's context window",
            "overflow": " after the model refused a request as too long",
        }.get(str(trigger), "")
        return (
            f"{lead}{why}: {what} replaced by a summary "
            f"(about {before} tokens before, about {after} after)."
        )
    if status == "failed":
        return f"Could not compact the conversation: {_error_message(record)}"
    if status == "cancelled" and trigger == "command":
        return "Compaction cancelled; the conversation is unchanged."
    return ""


def _error_message(record: Record) -> str:
    error = record.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    return str(message) if message else "the summary request failed"


def _tokens(value: object) -> str:
    return f"{value:,}" if type(value) is int else "?"


def _chunk(kind: str, text: str, compaction_id: str) -> dict[str, Any]:
    return text_chunk(kind, text, meta={"notice": True, "compaction": compaction_id})
