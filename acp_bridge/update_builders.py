"""Every ``session/update`` the bridge sends, one builder per kind.

The live path (the turn, the running tools, modes and config options) and the
replay of ``session/load`` (`acp_bridge.log.replay`, which also builds the
compaction updates through `acp_bridge.compaction.shown`) build their updates
here, so what a replay shows has the shape the editor saw live by
construction.  The hot path of text chunks serializes a byte template
(`acp_bridge.protocol.frames.UpdateFrames`) that is itself made from
`text_chunk`.  Plain dicts in, plain dicts out; nothing here is imported
from above the log, so both the loop and the log can use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "CANCELLED_META",
    "available_commands_update",
    "compaction_update",
    "config_option_update",
    "current_mode_update",
    "is_cancelled",
    "notice_update",
    "plan_items_update",
    "plan_markdown_update",
    "plan_removed",
    "plan_update",
    "session_info_update",
    "text_chunk",
    "tool_call",
    "tool_call_update",
    "usage_update",
    "user_message_chunk",
]

Update = dict[str, Any]


def text_chunk(
    kind: str, text: str, *, message_id: str | None = None, meta: Mapping[str, Any] | None = None
) -> Update:
    """An ``agent_message_chunk`` or ``agent_thought_chunk`` of ``text``
    (``meta``: its ``_meta.acpBridge``)."""
    update: Update = {"sessionUpdate": kind}
    if message_id is not None:
        update["messageId"] = message_id
    update["content"] = {"type": "text", "text": text}
    if meta is not None:
        update["_meta"] = {"acpBridge": dict(meta)}
    return update


def user_message_chunk(block: Mapping[str, Any]) -> Update:
    return {"sessionUpdate": "user_message_chunk", "content": dict(block)}


def tool_call(fields: Mapping[str, Any]) -> Update:
    """A tool call's announcement (``fields``: what its ``tool/announce`` record keeps)."""
    return {"sessionUpdate": "tool_call", **fields}


def tool_call_update(fields: Mapping[str, Any]) -> Update:
    """A tool call's update (``fields``: what its ``tool/update`` record keeps)."""
    return {"sessionUpdate": "tool_call_update", **fields}


# The ``_meta`` of the final update of a tool call the user cancelled alone
# (``tool_call/cancel``): its status is v1's ``failed``, and a dialect that has
# ``cancelled`` (ACP v2) shows that instead (`is_cancelled`).
CANCELLED_META: Final = {"acpBridge": {"cancelled": True}}


def is_cancelled(update: Mapping[str, Any]) -> bool:
    """A tool call update marked with `CANCELLED_META`."""
    meta = update.get("_meta")
    return isinstance(meta, dict) and meta.get("acpBridge", {}).get("cancelled") is True


def usage_update(used: int, size: int, extra: Mapping[str, Any] | None = None) -> Update:
    """The context used and its size (``extra``: the cost so far, if known)."""
    update: Update = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if extra:
        update.update(extra)
    return update


def available_commands_update(commands: Iterable[Mapping[str, Any]]) -> Update:
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {key: dict(value) if isinstance(value, dict) else value for key, value in c.items()}
            for c in commands
        ],
    }


def session_info_update(title: str) -> Update:
    return {"sessionUpdate": "session_info_update", "title": title}


def current_mode_update(mode: str) -> Update:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}


def config_option_update(options: list[dict[str, Any]]) -> Update:
    return {"sessionUpdate": "config_option_update", "configOptions": options}


def compaction_update(compaction_id: str, status: str, **fields: Any) -> Update:
    return {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": status,
        **fields,
    }


def notice_update(severity: str, title: str, description: str | None = None) -> Update:
    """A ``notice`` (for clients that opted in; `acp_bridge.notices` decides)."""
    update: Update = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if description:
        update["description"] = description
    return update


def plan_update(entries: Iterable[Mapping[str, Any]]) -> Update:
    """The ``plan`` update of a plan's entries (the whole list: the client replaces its plan)."""
    return {"sessionUpdate": "plan", "entries": _plan_entries(entries)}


def plan_items_update(plan_id: str, entries: Iterable[Mapping[str, Any]]) -> Update:
    """A ``plan_update`` of one plan by id, as its entries (a client with
    ``clientCapabilities.plan`` replaces that plan, keeping the others)."""
    plan = {"type": "items", "planId": plan_id, "entries": _plan_entries(entries)}
    return {"sessionUpdate": "plan_update", "plan": plan}


def plan_markdown_update(plan_id: str, content: str) -> Update:
    """A ``plan_update`` of one plan by id, as Markdown the model wrote."""
    plan = {"type": "markdown", "planId": plan_id, "content": content}
    return {"sessionUpdate": "plan_update", "plan": plan}


def plan_removed(plan_id: str) -> Update:
    """A ``plan_removed``: the client drops the plan of that id."""
    return {"sessionUpdate": "plan_removed", "planId": plan_id}


def _plan_entries(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"content": e["content"], "priority": e["priority"], "status": e["status"]} for e in entries
    ]


def subagent_update(session_id: str, title: str, cwd: str) -> Update:
    """``subagent_update``: the parent's announcement of a child session (a client
    with ``clientCapabilities.subagents``), sent before any of the child's traffic;
    the client may cancel the child alone (``capabilities.cancel``)."""
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": session_id,
        "title": title,
        "cwd": cwd,
        "capabilities": {"cancel": {}},
    }


def session_message(
    message_id: str, sender: str, recipient: str, content: list[dict[str, Any]]
) -> Update:
    """``session_message``: a message between two sessions (a task handed to a
    child, a child's answer to its parent), whole."""
    return {
        "sessionUpdate": "session_message",
        "messageId": message_id,
        "senderSessionId": sender,
        "recipientSessionId": recipient,
        "content": content,
    }
