"""The context state of one session: its system prompt, its window, its cost so far.

The system prompt is built on the session's first model request (reading the
instruction files in a worker thread) and kept for every later one; loading
the session again builds it anew, so edited instruction files are read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread

from .config import ContextConfig
from .estimate import RequestEstimate
from .instructions import read_instructions
from .system_prompt import ClientPrompt, environment, system_prompt
from .windows import ModelInfo

__all__ = ["SessionContext", "cost_so_far"]

# Window sources a provider's own report (a scripted usage event) may override.
_WEAK_SOURCES = frozenset({"known", "default"})


@dataclass
class SessionContext:
    config: ContextConfig
    cwd: str
    additional_directories: Sequence[str] = ()
    # The client advertised ``session.compaction``: compaction_update is sent.
    compaction_updates: bool = False
    # The client advertised ``session.notices``: notices are sent as such
    # (`acp_bridge.notices`).
    notices: bool = False
    system: str | None = None
    # The system prompt the editor gave the session (ACP's ``systemPrompt``), if any.
    client_prompt: ClientPrompt | None = None
    # The session's cost so far (with prices), and its currency.
    cost: float = 0.0
    currency: str | None = None
    # A window the provider reported in a stream (a scripted usage event).
    reported_window: int | None = None
    # The next request's size, kept up to date as the session grows.
    estimate: RequestEstimate = field(default_factory=RequestEstimate, repr=False)

    async def system_prompt(self, tools: Iterable[Any]) -> str:
        """The session's system prompt (built once; see the module docstring).

        ``tools`` are the session's tools (anything with a ``name`` and a
        ``description``: tools or their specs)."""
        if self.system is None:
            listed = tuple((str(tool.name), str(tool.description)) for tool in tools)
            self.system = await anyio.to_thread.run_sync(self._build, listed)
        return self.system

    def _build(self, tools: Sequence[tuple[str, str]]) -> str:
        found = read_instructions(self.cwd, self.config.config_dir)
        env = environment(self.cwd, self.additional_directories, tools, found)
        return system_prompt(self.config, env, self.client_prompt)

    def reload(self) -> None:
        """Read the instruction files again before the next request."""
        self.system = None

    def window(self, info: ModelInfo) -> int:
        """The context window to plan with: the model's, or one its stream reported."""
        if self.reported_window and info.window_source in _WEAK_SOURCES:
            return self.reported_window
        return info.context_window

    def add_cost(self, info: ModelInfo, input_tokens: int, output_tokens: int) -> dict[str, Any]:
        """Count one request's cost; the ``cost`` of a usage_update (empty without a price)."""
        price = info.price
        if price is None:
            return {}
        if self.currency not in (None, price.currency):
            self.cost = 0.0  # a model priced in another unit: count from here
        self.currency = price.currency
        self.cost += price.of(input_tokens, output_tokens)
        return {"cost": {"amount": round(self.cost, 6), "currency": price.currency}}


def cost_so_far(records: Iterable[Mapping[str, Any]]) -> tuple[float, str | None]:
    """The cost the last ``usage/update`` of a log reported (a reopened session
    goes on from it)."""
    # The last one that reported a cost, looked for from the end.
    for record in reversed(records if isinstance(records, Sequence) else list(records)):
        cost = record.get("cost") if record.get("type") == "usage/update" else None
        if isinstance(cost, Mapping) and isinstance(cost.get("amount"), int | float):
            currency = cost.get("currency") if isinstance(cost.get("currency"), str) else None
            return float(cost["amount"]), currency
    return 0.0, None
