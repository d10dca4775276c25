"""The MCP servers of one session: their connections, their tools, and what to tell.

All servers start at once (`SessionServers.start`); ``session/new`` (or
load, resume, fork) waits for them a bounded while (`wait`).  A server still
starting then joins when it is ready: its tools are offered from the next
model request on.  The tools' names are assigned over every connected
server at once (`acp_bridge.mcp.naming`), so they do not depend on the
order the servers came up in.

Every change is logged as an ``mcp/server`` record (session level):
``starting``, ``connected`` with the tools offered (names and a hash of each
schema), ``tools`` when the list changed, ``failed`` with the reason.  A
failure, and a late join, are told to the user (``report``); a failure is
also told to the model, once, in the next user message (`take_notes`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

import anyio
import orjson

from ..json_depth import MAX_DEPTH
from ..notices import Severity
from .link import ServerLink
from .naming import assign_names
from .specs import ServerSpec
from .tool import McpTool, make_tool

__all__ = ["SessionServers", "schema_hash"]

log = logging.getLogger("acp_bridge.mcp")

# How long close() waits for the servers to stop (each one is bounded itself).
CLOSE_BOUND: Final = 5.0

Record = Callable[..., None]
Report = Callable[[Severity, str], None]  # (severity, text)


def schema_hash(schema: Any) -> str:
    return hashlib.sha256(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


class SessionServers:
    def __init__(
        self,
        specs: Sequence[ServerSpec],
        cwd: str,
        *,
        record: Record,
        report: Report,
    ) -> None:
        self.links: dict[str, ServerLink] = {
            spec.name: ServerLink(spec, cwd, self._changed) for spec in specs
        }
        self.tools: dict[str, McpTool] = {}
        # Bumped on every change of ``tools`` (the registry's spec cache).
        self.version = 0
        self._record = record
        self._report = report
        # What the model is told once, in the next user message.
        self._notes: list[str] = []
        self._waited = False
        # Tools left out that the user was told of, by server.
        self._left_out_said: dict[str, set[str]] = {}
        self.closed = False

    def start(self, spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], object]) -> None:
        for link in self.links.values():
            spec = link.spec
            self._log(link, "starting", transport=spec.transport, origin=spec.origin)
            spawn(link.run)

    async def wait(self, bound: float) -> None:
        """Until every server is ready or failed, at most ``bound`` seconds."""
        with anyio.move_on_after(bound):
            for link in self.links.values():
                await link.settled.wait()
        self._waited = True
        for link in self.links.values():
            if link.state == "starting":
                self._report(
                    "warning",
                    f"MCP server {link.spec.name!r} is still starting after {bound:g} s; "
                    "its tools will be offered once it is ready.",
                )

    def take_notes(self) -> list[str]:
        """What the model has not been told yet (said once)."""
        notes, self._notes = self._notes, []
        return notes

    async def close(self) -> None:
        """Stop every server (EOF, SIGTERM, SIGKILL for stdio ones), bounded."""
        self.closed = True
        for link in self.links.values():
            link.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_BOUND):
            for link in self.links.values():
                await link.done.wait()

    # -- changes -------------------------------------------------------------------

    def _log(self, link: ServerLink, status: str, **fields: Any) -> None:
        if not self.closed:
            self._record(name=link.spec.name, status=status, **fields)

    def _rebuild(self) -> None:
        ready = [link for link in self.links.values() if link.state == "ready"]
        names = assign_names((link.spec.name, tool.name) for link in ready for tool in link.tools)
        tools: dict[str, McpTool] = {}
        for link in ready:
            for remote in link.tools:
                name = names[(link.spec.name, remote.name)]
                tools[name] = make_tool(name, link, remote)
        self.tools = tools
        self.version += 1

    def _say_left_out(self, link: ServerLink) -> None:
        """Tell the user, once per tool, which tools the server listed and the
        bridge cannot offer (an input schema nested deeper than the bridge's bound)."""
        said = self._left_out_said.setdefault(link.spec.name, set())
        new = [name for name in link.left_out if name not in said]
        if not new or self.closed:
            return
        said.update(new)
        names = ", ".join(repr(name) for name in new)
        self._report(
            "warning",
            f"MCP server {link.spec.name!r}: tool(s) {names} left out: the input schema nests "
            f"deeper than {MAX_DEPTH} levels, more than the bridge takes.",
        )

    def _changed(self, link: ServerLink) -> None:
        had = any(tool.link is link for tool in self.tools.values())
        self._rebuild()
        name = link.spec.name
        if link.state == "ready":
            offered = [
                {"name": t.name, "tool": t.remote, "schema": schema_hash(t.schema)}
                for t in self.tools.values()
                if t.link is link
            ]
            self._log(link, "tools" if had else "connected", tools=offered)
            self._say_left_out(link)
            if not had and self._waited and not self.closed:
                self._report(
                    "info",
                    f"MCP server {name!r} is connected: its {len(offered)} tool(s) are offered "
                    "from the next model request on.",
                )
        elif link.state == "failed":
            why = link.error or "unknown reason"
            self._log(link, "failed", error=why)
            if self.closed:
                return
            self._report("error", f"MCP server {name!r} is not available: {why}.")
            self._notes.append(
                f"MCP server {name!r} is not available ({why}): "
                + ("its tools are gone." if had else "its tools cannot be used.")
            )
