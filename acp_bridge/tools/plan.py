"""``update_plan``: the model's plan of a multi-step task, shown by the editor.

Each call gives the whole list of entries (``content``, ``status`` pending |
in_progress | completed, ``priority`` high | medium | low); the editor gets it
as an ACP ``plan`` update (the client replaces its plan with each one).  It
changes nothing on the user's machine, so it runs in every mode without a
permission prompt.  The call is logged like any other (``tool/call`` with its
arguments, ``tool/result``), and `acp_bridge.log.replay` shows the latest
plan again on ``session/load`` (`latest_plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..update_builders import plan_update
from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from .arguments import PlanArgs

__all__ = ["NAME", "UpdatePlan", "latest_plan"]

NAME: Final = "update_plan"


class UpdatePlan(Tool["PlanArgs"]):
    name = NAME
    description = "Show the user your plan of a multi-step task: all its steps, each call."
    kind = "think"
    args_model = LazyArgs["PlanArgs"]("PlanArgs")
    read_only = True

    def title(self, args: PlanArgs) -> str:
        return "Update the plan"

    async def run(self, args: PlanArgs, ctx: ToolContext) -> ToolOutput:
        if ctx.emit is None:
            raise ToolError("this session cannot show a plan")
        entries = [entry.model_dump() for entry in args.entries]
        ctx.emit(plan_update(entries))
        counts = {s: sum(e["status"] == s for e in entries) for s in ("completed", "in_progress")}
        pending = len(entries) - counts["completed"] - counts["in_progress"]
        return ToolOutput(
            f"The plan is shown to the user: {len(entries)} steps ({counts['completed']} "
            f"completed, {counts['in_progress']} in progress, {pending} pending)."
        )


# The types `latest_plan` reads (`acp_bridge.log.by_type`).
PLAN_TYPES: Final = frozenset({"tool/call", "tool/result"})


def latest_plan(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The entries of the last ``update_plan`` call that succeeded, if any
    (only records of `PLAN_TYPES` count)."""
    calls: dict[str, list[dict[str, Any]]] = {}
    latest: list[dict[str, Any]] | None = None
    for record in records:
        kind = record.get("type")
        if kind == "tool/call" and record.get("name") == NAME:
            if record.get("status") == "dispatched":
                try:
                    args = UpdatePlan.args_model.model_validate(record.get("input"))
                except ValueError:
                    continue
                calls[str(record.get("tool_call_id"))] = [e.model_dump() for e in args.entries]
        elif kind == "tool/result" and record.get("is_error") is False:
            found = calls.pop(str(record.get("tool_call_id")), None)
            if found is not None:
                latest = found
    return latest
