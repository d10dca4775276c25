"""What the editor saw, as a pure function of the log (invariant I4).

`replay_updates` turns a session's records into the ``session/update``
notification params (``{"sessionId", "update"}``) that ``session/load`` sends
to rebuild the conversation in the editor.  It equals what was sent live,
except that text arrives in fewer, larger chunks (each ``stream/delta`` record
holds the chunks written to the editor in one batch, joined):

* ``user/message``  one ``user_message_chunk`` per prompt block, exactly as the
  editor sent it (the record's ``prompt``; ``content`` for older records);
* ``stream/delta``  ``agent_message_chunk`` (text) and ``agent_thought_chunk``
  (reasoning) with the ``messageId`` of the attempt's ``stream/start``; tool
  call arguments were never shown and are not replayed;
* ``tool/announce`` / ``tool/update``  the ``tool_call`` / ``tool_call_update``
  as sent, so every tool call ends with its final status and content, except
  content that only the process that sent it could honour: an embedded
  terminal (its id names a terminal of the editor's that is gone after a
  restart) is left out, its command's output and exit status being the text
  of the call's final update (`LIVE_ONLY_CONTENT`);
* ``usage/update``  ``usage_update`` with ``used``, ``size`` and ``cost``;
* ``agent/request-error`` with ``retrying: true``  the notice shown while the
  provider retried (`retry_notice`);
* ``compaction`` (its outcome)  what the editor was shown of it
  (`acp_bridge.log.compaction.compaction_updates`: a ``compaction_update``
  when ``compaction`` is true, the client having advertised
  ``session.compaction``, else a notice), and for a ``/compact`` turn its
  answer; such a turn without a compaction answered that there was nothing
  to compact.

Markers in ``_meta.acpBridge`` of the replayed chunks (not sent live, where
the editor saw the stop happen):

* ``{"interrupted": true}`` on every chunk of a message the user stopped
  (its ``assistant/message`` has ``interrupted: true``);
* ``{"abandoned": outcome}`` on every chunk of an attempt that left no
  message (``assistant/attempt``: ``empty``, ``provider_error``,
  ``timed_out``, ``disconnected``, ``internal``, ``crashed``); that text was
  shown but is not in the model's history;
* ``{"interrupted": true, "crashed": true}`` on every chunk of a message
  recovered after the agent process died mid-stream (`acp_bridge.log.reopen`);
* ``"replaced": true`` added on every chunk of a reply a later regenerate
  replaced (still shown, no longer in the model's history).

After the user message of the session's first turn comes the update the
agent sent live when that turn started: ``session_info_update`` with the
session's title (the start of that first prompt,
`acp_bridge.sessions.info.title_from_prompt` rules), when it has one.  The
slash commands are not part of the replay: they are announced after the
load's answer (`acp_bridge.commands.catalog`).

A slash command's turn (``turn/start`` with ``command``) replays its blocks
as the user's message and its ``command/answer`` as the agent's message.

The latest plan the model showed (`acp_bridge.tools.plan.latest_plan`: its
last ``update_plan`` call that succeeded) comes last, as a ``plan`` update.

A regenerate turn started by the ``/regenerate`` command keeps the command
the editor sent in its ``turn/start`` (``prompt``), replayed as the user's
message of that turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..update_builders import (
    plan_update,
    session_info_update,
    text_chunk,
    tool_call,
    tool_call_update,
    usage_update,
    user_message_chunk,
)
from .derive import replaced_turns

__all__ = [
    "CHUNK_UPDATES",
    "command_answer",
    "replay_updates",
    "retry_notice",
    "title_update",
]

Record = Mapping[str, Any]

# stream/delta part kind -> the session update that showed it.
CHUNK_UPDATES: Final = {"text": "agent_message_chunk", "reasoning": "agent_thought_chunk"}

TITLE_LENGTH: Final = 60


def title_update(title: str) -> dict[str, Any]:
    return session_info_update(title)


def title_from_prompt(blocks: Iterable[Mapping[str, Any]]) -> str | None:
    """A session's title: the start of its first prompt's text, on one line.

    Falls back to the name (or URI) of the first resource; None when the
    prompt has neither.
    """
    fallback: str | None = None
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text = " ".join(block["text"].split())
            if text:
                if len(text) > TITLE_LENGTH:
                    text = text[: TITLE_LENGTH - 1].rstrip() + "\u2026"
                return text
        elif fallback is None:
            for key in ("name", "uri"):
                if isinstance(block.get(key), str) and block[key]:
                    fallback = block[key]
                    break
            else:
                resource = block.get("resource")
                if isinstance(resource, Mapping) and isinstance(resource.get("uri"), str):
                    fallback = resource["uri"]
    return fallback


def replay_updates(
    records: Iterable[Record], *, compaction: bool = False, notices: bool = False
) -> list[dict[str, Any]]:
    """The ``session/update`` params that replay a session (see the module docstring).

    ``notices``: the client takes ACP notices, which are live only, so the
    thought chunks marked ``_meta.acpBridge.notice`` are left out.
    """
    from .compaction import compaction_updates, nothing_to_compact_update

    records = list(records)
    # A /compact turn that has not (yet) shown a compaction.
    compact_turn: object = None
    session_id = _session_id(records)
    markers = _markers(records)
    replaced = replaced_turns(records)
    message_ids: dict[str, str] = {}
    updates: list[dict[str, Any]] = []
    append = updates.append
    first_turn = True
    for record in records:
        kind = record.get("type")
        if kind == "stream/delta":
            # The hot path: most records of a long session are deltas.
            chunks = _chunks(record, message_ids, markers)
            if record.get("turn") in replaced:
                for update in chunks:
                    meta = update.setdefault("_meta", {"acpBridge": {}})
                    meta["acpBridge"]["replaced"] = True
            for update in chunks:
                append({"sessionId": session_id, "update": update})
            continue
        produced = _updates_of(record, message_ids, markers)
        if kind == "turn/start" and record.get("command") == "compact":
            compact_turn = record.get("turn")
        elif kind == "compaction" and record.get("status") != "in_progress":
            produced = compaction_updates(record, opted=compaction, live=False)
            compact_turn = None
        elif kind == "turn/end" and compact_turn is not None:
            if record.get("turn") == compact_turn and record.get("reason") == "end_turn":
                produced.append(nothing_to_compact_update())
            compact_turn = None
        if first_turn and kind == "user/message":
            first_turn = False
            title = title_from_prompt(record.get("prompt", record.get("content")) or ())
            if title is not None:
                produced.append(title_update(title))
        for update in produced:
            if notices and _is_notice(update):
                continue
            append({"sessionId": session_id, "update": update})
    from ..tools.plan import latest_plan

    plan = latest_plan(records)
    if plan is not None:
        append({"sessionId": session_id, "update": plan_update(plan)})
    return updates


def command_answer(text: str) -> dict[str, Any]:
    """How a slash command's answer is shown (live and replayed)."""
    return text_chunk("agent_message_chunk", text, meta={"command": True})


def retry_notice(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The thought chunk that tells the user a failed request is being retried.

    ``fields`` are those of an ``agent/request-error`` record with
    ``retrying: true``.  It is marked ``_meta.acpBridge.notice`` and is never
    recorded as reasoning: it does not enter the model's history.
    """
    error = fields.get("error") or {}
    delay = fields.get("retry_delay") or 0
    text = (
        f"The model request failed ({error.get('message', 'error')}); "
        f"retrying in {delay:g}s (retry {fields.get('retry_attempt')})."
    )
    return text_chunk("agent_thought_chunk", text, meta={"notice": True})


def _is_notice(update: Mapping[str, Any]) -> bool:
    meta = update.get("_meta")
    marks = meta.get("acpBridge") if isinstance(meta, Mapping) else None
    return (
        update.get("sessionUpdate") == "agent_thought_chunk"
        and isinstance(marks, Mapping)
        and marks.get("notice") is True
    )


def _session_id(records: list[Record]) -> str | None:
    for record in records:
        if record.get("type") == "session/start":
            session_id = record.get("session_id")
            return session_id if isinstance(session_id, str) else None
    return None


def _markers(records: list[Record]) -> dict[str, dict[str, Any]]:
    """attempt id -> the ``_meta.acpBridge`` marker of its chunks, if any."""
    markers: dict[str, dict[str, Any]] = {}
    for record in records:
        kind = record.get("type")
        attempt = record.get("attempt")
        if not isinstance(attempt, str):
            continue
        if kind == "assistant/message" and record.get("interrupted") is True:
            markers[attempt] = {"interrupted": True}
            if record.get("recovered") == "crashed":
                markers[attempt]["crashed"] = True
        elif kind == "assistant/attempt":
            markers[attempt] = {"abandoned": record.get("outcome")}
    return markers


def _updates_of(
    record: Record, message_ids: dict[str, str], markers: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    kind = record.get("type")
    if kind == "user/message" or (kind == "turn/start" and "prompt" in record):
        blocks = record.get("prompt", record.get("content"))
        return [
            user_message_chunk(block)
            for block in (blocks if isinstance(blocks, list) else [])
            if isinstance(block, Mapping)
        ]
    if kind == "stream/start":
        attempt, message_id = record.get("attempt"), record.get("message_id")
        if isinstance(attempt, str) and isinstance(message_id, str):
            message_ids[attempt] = message_id
        return []
    if kind == "tool/announce":
        return _outliving(tool_call(record["update"]))
    if kind == "tool/update":
        return _outliving(tool_call_update(record["update"]))
    if kind == "usage/update":
        cost = record.get("cost")
        extra = {"cost": dict(cost)} if isinstance(cost, Mapping) else None
        return [usage_update(record["used"], record["size"], extra)]
    if kind == "agent/request-error" and record.get("retrying") is True:
        return [retry_notice(record)]
    if kind == "command/answer" and isinstance(record.get("text"), str):
        return [command_answer(record["text"])]
    return []


# Tool call content that names something of the process that showed it (an
# embedded terminal of the editor's, by id): gone after a restart.
LIVE_ONLY_CONTENT: Final = frozenset({"terminal"})


def _outliving(update: dict[str, Any]) -> list[dict[str, Any]]:
    """``update`` without its live-only content (`LIVE_ONLY_CONTENT`).

    A command's terminal is replayed as what its final update holds anyway:
    the captured output and the exit status, as text.  An update that held
    only a terminal (the embed sent when the command started) is left out.
    """
    content = update.get("content")
    if not isinstance(content, list):
        return [update]
    kept = [
        item
        for item in content
        if not (isinstance(item, Mapping) and item.get("type") in LIVE_ONLY_CONTENT)
    ]
    if len(kept) == len(content):
        return [update]
    rest = {key: value for key, value in update.items() if key != "content"}
    if kept:
        return [{**rest, "content": kept}]
    if set(rest) <= {"sessionUpdate", "toolCallId"}:
        return []  # nothing left to show
    return [rest]


def _chunks(
    record: Record, message_ids: dict[str, str], markers: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    attempt = record.get("attempt")
    message_id = message_ids.get(attempt) if isinstance(attempt, str) else None
    marker = markers.get(attempt) if isinstance(attempt, str) else None
    out: list[dict[str, Any]] = []
    for _, part_kind, text in record.get("parts", ()):
        update_kind = CHUNK_UPDATES.get(part_kind)
        if update_kind is None:
            continue
        out.append(text_chunk(update_kind, text, message_id=message_id, meta=marker))
    return out
