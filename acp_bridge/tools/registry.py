"""The tools a session offers the model, by name.

`TOOLS` is the process-wide registry every new session uses; it starts with
the built-in tools.  Register your own before the server starts::

    from acp_bridge.tools import TOOLS
    TOOLS.register(CountLines())
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..providers.base import ToolSpec
from .base import Tool
from .command import RunCommand
from .files import EditFile, ReadFile, WriteFile
from .plan import UpdatePlan
from .search import FindFiles, SearchText
from .subagent import Task

AnyTool = Tool[Any]


class ToolRegistry:
    def __init__(self, tools: list[AnyTool] | None = None) -> None:
        self._tools: dict[str, AnyTool] = {}
        # What `specs` returns, built once per change of the registry: every
        # model request carries it, and building JSON Schemas is not free.
        self._specs: tuple[ToolSpec, ...] | None = None
        for tool in tools or []:
            self.register(tool)

    @classmethod
    def with_builtins(cls) -> ToolRegistry:
        return cls(
            [
                ReadFile(),
                WriteFile(),
                EditFile(),
                RunCommand(),
                FindFiles(),
                SearchText(),
                UpdatePlan(),
                Task(),
            ]
        )

    def register(self, tool: AnyTool) -> None:
        """Add ``tool`` (replacing a tool of the same name)."""
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError("a tool needs a non-empty name")
        self._tools[name] = tool
        self._specs = None

    def get(self, name: str) -> AnyTool | None:
        return self._tools.get(name)

    def __iter__(self) -> Iterator[AnyTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def specs_ready(self) -> bool:
        """Whether `specs` is built (else it imports and builds pydantic models)."""
        return self._specs is not None

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told: names, descriptions and argument schemas."""
        if self._specs is None:
            self._specs = tuple(
                ToolSpec(tool.name, tool.description, tool.args_model.model_json_schema())
                for tool in self._tools.values()
            )
        return self._specs


TOOLS = ToolRegistry.with_builtins()
