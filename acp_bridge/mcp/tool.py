"""An MCP tool as a bridge `Tool`, and the tool registry of a session with MCP servers.

A call goes through the same runner as a built-in tool (announcement,
permission, ``in_progress``, the final status); `McpTool.run` sends
``tools/call`` and maps the result (`acp_bridge.mcp.content`).  On a Stop
the call's cancellation reaches the ``mcp`` client, which sends
``notifications/cancelled``; the call's result then says it was stopped,
with the progress messages the server sent before, if any.

`SessionTools` is the registry a session with MCP servers uses: the
built-in tools first, then the tools of its servers as they are now (a
server that joins late adds its tools from the next model request on; one
that fails takes its tools away).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Protocol
from urllib.parse import quote

import anyio
from pydantic import BaseModel, ConfigDict

from ..providers.base import ToolSpec
from ..tools.base import Tool, ToolContext, ToolError, ToolKind, ToolOutput
from ..tools.registry import ToolRegistry
from .content import kind_of, map_result, read_only_of
from .link import CallFailed, RemoteTool, ServerLink


class ServedTools(Protocol):
    """What the merged registry needs of a session's servers (`servers.SessionServers`)."""

    @property
    def tools(self) -> dict[str, McpTool]: ...

    @property
    def version(self) -> int: ...


__all__ = ["McpArgs", "McpTool", "SessionTools", "make_tool"]


class McpArgs(BaseModel):
    """Any JSON object: the server checks the arguments against its own schema."""

    model_config = ConfigDict(extra="allow")


def stopped_text(name: str, progress: list[str]) -> str:
    text = (
        f"The user stopped the turn while this {name} call was running; the MCP server was "
        "told to cancel it, and it returned no result."
    )
    if progress:
        text += " What it reported before: " + " | ".join(progress[-5:])
    return text


class McpTool(Tool[McpArgs]):
    """One tool of one MCP server (a subclass per tool is made by `make_tool`)."""

    args_model = McpArgs
    server: ClassVar[str] = ""
    remote: ClassVar[str] = ""
    schema: ClassVar[dict[str, Any]] = {}

    def __init__(self, link: ServerLink) -> None:
        self.link = link

    def title(self, args: McpArgs) -> str:
        return f"{self.remote} ({self.server})"

    @property
    def rule_key(self) -> str:
        """``mcp:<server>/<tool>`` with the real names, each percent-encoded
        (``/`` and ``:`` included): the model's name is sanitized, so servers
        ``a_b`` and ``a.b`` would share one, and a rule must not."""
        return f"mcp:{quote(self.server, safe='')}/{quote(self.remote, safe='')}"

    def spec(self) -> ToolSpec:
        schema = self.schema if self.schema.get("type") == "object" else {"type": "object"}
        return ToolSpec(self.name, self.description, schema)

    async def run(self, args: McpArgs, ctx: ToolContext) -> ToolOutput:
        progress: list[str] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            if message:
                progress.append(message[:500])

        try:
            result = await self.link.call(self.remote, dict(args.model_extra or {}), on_progress)
        except CallFailed as exc:
            raise ToolError(str(exc)) from None
        except anyio.get_cancelled_exc_class():
            if ctx.stopped():
                ctx.partial = ToolOutput(stopped_text(self.name, progress), is_error=True)
            raise
        mapped = map_result(result, ctx.max_output)
        return ToolOutput(
            mapped.text, mapped.is_error, content=mapped.content, raw_output=mapped.raw_output
        )


def make_tool(name: str, link: ServerLink, remote: RemoteTool) -> McpTool:
    """The bridge tool ``name`` for ``remote`` of ``link``'s server."""
    kind: ToolKind = kind_of(remote.annotations)  # type: ignore[assignment]
    description = remote.description or f"The {remote.name} tool of the {link.spec.name} server."
    cls = type(
        "McpTool",
        (McpTool,),
        {
            "name": name,
            "description": description,
            "kind": kind,
            "read_only": read_only_of(remote.annotations),
            "server": link.spec.name,
            "remote": remote.name,
            "schema": remote.input_schema,
        },
    )
    tool: McpTool = cls(link)
    return tool


class SessionTools(ToolRegistry):
    """The built-in tools of ``base``, then the MCP tools of ``servers``."""

    def __init__(self, base: ToolRegistry, servers: ServedTools) -> None:
        super().__init__()
        self.base = base
        self.servers = servers
        self._builtin: tuple[ToolSpec, ...] | None = None
        self._version = -1
        self._merged: tuple[ToolSpec, ...] = ()

    def get(self, name: str) -> Any:
        tool = self.base.get(name)
        return tool if tool is not None else self.servers.tools.get(name)

    def __iter__(self) -> Iterator[Any]:
        yield from self.base
        yield from self.servers.tools.values()

    def __len__(self) -> int:
        return len(self.base) + len(self.servers.tools)

    @property
    def specs_ready(self) -> bool:
        return self.base.specs_ready

    def specs(self) -> tuple[ToolSpec, ...]:
        builtin = self.base.specs()
        if builtin is not self._builtin or self._version != self.servers.version:
            self._builtin, self._version = builtin, self.servers.version
            self._merged = builtin + tuple(t.spec() for t in self.servers.tools.values())
        return self._merged
