"""ACP v2's view of a tool call's progress: the cancel capability and the
``cancelled`` status (`acp_bridge.protocol.v2` calls `tool_update` for every
``tool_call_update`` it sends, live or replayed).

The engine's updates have v1's statuses (the log keeps them so).  In v2:

* a call ``in_progress`` may be cancelled alone (``tool_call/cancel``, which
  every running call accepts: `acp_bridge.tools.runner.ToolRunner.cancel_call`):
  it advertises ``capabilities.cancel``;
* a final update clears the capabilities, and one the engine marked
  cancelled (`acp_bridge.update_builders.is_cancelled`) has status
  ``cancelled``, the mark itself left out.

The terminals of local commands (``terminal_update``,
``terminal_output_chunk``, `acp_bridge.tools.live_terminal`) are already in
v2's shapes and pass as they are.
"""

from __future__ import annotations

from typing import Any

from ..log.records import FINAL_TOOL_STATUSES
from ..update_builders import is_cancelled

__all__ = ["tool_update"]


def tool_update(update: dict[str, Any]) -> dict[str, Any]:
    """``update`` (a ``tool_call_update``'s fields) as v2 shows it; a new dict
    when it changes, else ``update`` itself."""
    status = update.get("status")
    if status == "in_progress":
        return {**update, "capabilities": {"cancel": {}}}
    if status not in FINAL_TOOL_STATUSES:
        return update
    shown = {**update, "capabilities": None}
    if is_cancelled(update):
        shown["status"] = "cancelled"
        ours = {k: v for k, v in update["_meta"]["acpBridge"].items() if k != "cancelled"}
        rest = {k: v for k, v in update["_meta"].items() if k != "acpBridge"}
        if ours:
            rest["acpBridge"] = ours
        if rest:
            shown["_meta"] = rest
        else:
            del shown["_meta"]
    return shown
