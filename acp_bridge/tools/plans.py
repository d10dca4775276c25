"""A session's plans by id (the state `acp_bridge.tools.plan`'s tools keep).

Apart from the tools so that `acp_bridge.tools.base` can name it without
importing the tools that use the base.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..update_builders import plan_items_update, plan_markdown_update, plan_update

if TYPE_CHECKING:
    from .arguments import PlanByIdArgs

__all__ = ["Plans", "plan_shown"]

Update = dict[str, Any]


@dataclass(slots=True)
class Plans:
    """A session's plans by id, in the order they were first shown: each is
    ``{"entries": [...]}`` or ``{"markdown": str}``."""

    by_id: dict[str, dict[str, Any]] = field(default_factory=dict)

    def apply(self, args: PlanByIdArgs) -> None:
        """Set or remove the plan ``args`` names."""
        if args.remove:
            self.by_id.pop(args.plan_id, None)
        elif args.markdown is not None:
            self.by_id[args.plan_id] = {"markdown": args.markdown}
        else:
            self.by_id[args.plan_id] = {"entries": [e.model_dump() for e in args.entries or ()]}

    def whole_list(self) -> list[dict[str, Any]] | None:
        """The entries of every plan that is a list, as one (None: there is none)."""
        lists = [plan["entries"] for plan in self.by_id.values() if "entries" in plan]
        return [entry for entries in lists for entry in entries] if lists else None

    def shown(self, *, by_id: bool) -> list[Update]:
        """The updates that show every plan: one ``plan_update`` per plan for a
        client that keeps plans by id, else one ``plan`` of `whole_list` (if any)."""
        if not by_id:
            entries = self.whole_list()
            return [] if entries is None else [plan_update(entries)]
        return [plan_shown(plan_id, plan) for plan_id, plan in self.by_id.items()]


def plan_shown(plan_id: str, plan: Mapping[str, Any]) -> Update:
    if "markdown" in plan:
        return plan_markdown_update(plan_id, plan["markdown"])
    return plan_items_update(plan_id, plan["entries"])
