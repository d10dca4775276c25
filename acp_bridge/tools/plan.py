"""``update_plan``: the model's plans of a multi-step task, shown by the editor.

A session keeps its plans by id (`Plans`), each a list of entries
(``content``, ``status`` pending | in_progress | completed, ``priority`` high |
medium | low) or Markdown the model wrote.  How the editor is shown them
depends on what it advertised:

* a client with ``clientCapabilities.plan`` gets `PlansById`: the model names
  a plan (``plan_id``, default ``"main"``), gives its whole list of entries or
  its Markdown, or removes it; the editor gets ACP ``plan_update`` (``items``
  or ``markdown`` form, with the ``planId``) and ``plan_removed``;
* any other client gets `UpdatePlan`, as before plans had ids: each call
  gives the whole list of entries of the plan ``"main"``, and the editor gets
  a ``plan`` update (the client replaces its plan with each one) holding the
  entries of every plan of the session that is a list, in the order they
  were first shown (a session only this tool wrote has the one plan).

Either changes nothing on the user's machine, so it runs in every mode
without a permission prompt.  The call is logged like any other
(``tool/call`` with its arguments, ``tool/result``); `plans_of` rebuilds the
plans from those records, so a reopened session has them again and
`acp_bridge.log.replay` shows them on ``session/load`` in the form the loading
client takes (`Plans.shown`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..update_builders import (
    plan_removed,
    plan_update,
)
from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput
from .plans import Plans, plan_shown

if TYPE_CHECKING:
    from .arguments import PlanArgs, PlanByIdArgs

__all__ = ["MAIN", "NAME", "PlansById", "UpdatePlan", "plans_of"]

NAME: Final = "update_plan"
# The plan a call without a ``plan_id`` (and every `UpdatePlan` call) is about.
MAIN: Final = "main"

Update = dict[str, Any]


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
        shown = entries
        if ctx.plans is not None:
            ctx.plans.by_id[MAIN] = {"entries": entries}
            shown = ctx.plans.whole_list() or []
        ctx.emit(plan_update(shown))
        return ToolOutput(_shown_text(entries))


class PlansById(Tool["PlanByIdArgs"]):
    """`UpdatePlan` for a client that keeps plans by id (see the module docstring)."""

    name = NAME
    description = (
        "Show the user your plan of a multi-step task: all its steps each call (or Markdown "
        "instead of steps). Keep several plans apart by plan_id; remove one that is done with."
    )
    kind = "think"
    args_model = LazyArgs["PlanByIdArgs"]("PlanByIdArgs")
    read_only = True

    def title(self, args: PlanByIdArgs) -> str:
        return f"Remove the plan {args.plan_id}" if args.remove else "Update the plan"

    async def run(self, args: PlanByIdArgs, ctx: ToolContext) -> ToolOutput:
        plans = ctx.plans
        if ctx.emit is None or plans is None:
            raise ToolError("this session cannot show a plan")
        plan_id = args.plan_id
        if args.remove:
            if plan_id not in plans.by_id:
                known = ", ".join(repr(p) for p in plans.by_id) or "none"
                raise ToolError(f"there is no plan {plan_id!r} (the plans: {known})")
            plans.apply(args)
            ctx.emit(plan_removed(plan_id))
            return ToolOutput(f"The plan {plan_id!r} is removed.")
        plans.apply(args)
        ctx.emit(plan_shown(plan_id, plans.by_id[plan_id]))
        if args.markdown is not None:
            return ToolOutput(f"The plan {plan_id!r} is shown to the user, as Markdown.")
        return ToolOutput(f"The plan {plan_id!r}: " + _shown_text(plans.by_id[plan_id]["entries"]))


def _shown_text(entries: list[dict[str, Any]]) -> str:
    counts = {s: sum(e["status"] == s for e in entries) for s in ("completed", "in_progress")}
    pending = len(entries) - counts["completed"] - counts["in_progress"]
    return (
        f"The plan is shown to the user: {len(entries)} steps ({counts['completed']} "
        f"completed, {counts['in_progress']} in progress, {pending} pending)."
    )


def plans_of(records: Iterable[Mapping[str, Any]]) -> Plans:
    """The plans a log ends with: every ``update_plan`` call that succeeded,
    applied in order.  A call of
    `UpdatePlan` (entries only) is about the plan ``"main"``."""
    calls: dict[str, PlanByIdArgs] = {}
    plans = Plans()
    for record in records:
        kind = record.get("type")
        if kind == "tool/call" and record.get("name") == NAME:
            if record.get("status") == "dispatched":
                try:
                    args = PlansById.args_model.model_validate(record.get("input"))
                except ValueError:
                    continue
                calls[str(record.get("tool_call_id"))] = args
        elif kind == "tool/result" and record.get("is_error") is False:
            found = calls.pop(str(record.get("tool_call_id")), None)
            if found is not None:
                plans.apply(found)
    return plans
