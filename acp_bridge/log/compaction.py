"""What the editor is shown of a compaction, live and on replay (a pure function of its records).

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
in the timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..update_builders import compaction_update, text_chunk

__all__ = [
    "NOTHING_TO_COMPACT",
    "compaction_updates",
    "nothing_to_compact_update",
    "opted_in",
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
