"""The agent's MCP entry points: servers of sessions, from open to close.

Imported at start-up, so it imports nothing heavy: the connections, the
tools and the ``mcp`` package load only when a session has servers.

* `McpHub.editor_specs`: the ``mcpServers`` of a request, checked (a bad
  entry is ``-32602`` naming its field);
* `McpHub.attach`: the editor's servers and the configured ones, merged,
  started for a session (once its ``session/start`` is logged); then
  `McpHub.ready` waits for them, at most ``start_timeout`` seconds;
* `McpHub.answer`: answers the request that opened the session, then sends
  what the user is to be told about its servers;
* `McpHub.before_turn`: the model is told in the next user message which
  servers failed (once);
* `McpHub.close` (``session/close``, ``session/delete``) and `close_all`
  (exit) stop the servers.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread

from ..jsonrpc.errors import RpcError
from ..redact import SECRETS

if TYPE_CHECKING:
    from ..loop.session import Session
    from .report import Reporter, Spawn
    from .servers import SessionServers
    from .specs import ServerSpec

__all__ = ["DEFAULT_START_TIMEOUT", "McpHub"]

log = logging.getLogger("acp_bridge.mcp")

DEFAULT_START_TIMEOUT: Final = 10.0


class McpHub:
    def __init__(self, spawn: Spawn) -> None:
        self.spawn = spawn
        self.start_timeout = DEFAULT_START_TIMEOUT
        # The config file that may list servers (``[[mcp_servers]]``), if any.
        self.config_file: str | None = None
        self._configured: list[ServerSpec] | None = None
        self.sessions: dict[str, tuple[SessionServers, Reporter]] = {}

    # -- the servers of a request ----------------------------------------------------

    def editor_specs(self, params: dict[str, Any]) -> list[ServerSpec]:
        servers = params.get("mcpServers")
        if servers is None:
            return []
        if not isinstance(servers, list):
            raise RpcError.invalid_params("mcpServers", "must be an array")
        if not servers:
            return []
        from .specs import SpecError, parse_servers

        try:
            return parse_servers(servers, "mcpServers", origin="editor")
        except SpecError as exc:
            raise RpcError.invalid_params(exc.field, exc.message) from None

    async def configured(self) -> list[ServerSpec]:
        """The config file's servers (read once, in a worker thread)."""
        if self._configured is None:
            path = self.config_file
            self._configured = [] if path is None else await anyio.to_thread.run_sync(_load, path)
        return self._configured

    # -- a session's servers -------------------------------------------------------------

    async def attach(self, session: Session, params: dict[str, Any]) -> None:
        """Start the session's servers (replacing those it had, on a load or resume)."""
        editor = self.editor_specs(params)
        configured = await self.configured()
        await self.close(session.id)
        if not editor and not configured:
            return
        from .report import Reporter
        from .servers import SessionServers
        from .specs import merge
        from .tool import SessionTools

        specs, notes = merge(editor, configured)
        for note in notes:
            log.warning("%s", note)
        # What the servers are given in env and headers is secret: a server
        # that echoes it (a result, an error) shows "[redacted]".
        for spec in specs:
            whole, split = spec.secrets()
            SECRETS.add(whole, parts=False)
            SECRETS.add(split)
        slog = session.log

        def record(**fields: Any) -> None:
            slog.append("mcp/server", 0, 0, **SECRETS.json(fields))

        reporter = Reporter(session, self.spawn)
        servers = SessionServers(specs, session.cwd, record=record, report=reporter)
        tools = session.tools
        base = tools.registry
        tools.registry = SessionTools(getattr(base, "base", base), servers)
        self.sessions[session.id] = (servers, reporter)
        servers.start(self.spawn)

    async def ready(self, session: Session) -> None:
        entry = self.sessions.get(session.id)
        if entry is not None:
            await entry[0].wait(self.start_timeout)

    def answered(self, session: Session) -> None:
        """The request that opened ``session`` is answered: what the user is to be
        told about its servers may be sent now."""
        entry = self.sessions.get(session.id)
        if entry is None:
            return
        reporter = entry[1]
        reporter.open = True
        reporter.flush()

    def before_turn(self, session: Session, blocks: list[dict[str, Any]]) -> None:
        """Tell the model, in the user message that starts the turn, what failed."""
        entry = self.sessions.get(session.id)
        if entry is None or not blocks:
            return
        notes = entry[0].take_notes()
        if notes:
            text = "[acp-bridge: " + " ".join(notes) + "]"
            blocks.append({"type": "text", "text": text})

    async def close(self, session_id: str) -> None:
        entry = self.sessions.pop(session_id, None)
        if entry is not None:
            servers, reporter = entry
            reporter.gone = True
            await servers.close()

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)
        self.kill_now()

    @staticmethod
    def kill_now() -> None:
        """SIGKILL every MCP server process still running (an exit that cannot wait)."""
        import sys

        stdio = sys.modules.get("acp_bridge.mcp.stdio")
        if stdio is not None:
            stdio.kill_all()


def _configured_entries(path: str) -> object:
    """The file's ``mcp_servers`` value (``[]`` when the file does not exist or
    lists none); raises OSError or ``tomllib.TOMLDecodeError`` when it cannot
    be read (a special file, one over `acp_bridge.paths.SMALL_FILE_LIMIT`)."""
    if not os.path.isfile(path):
        return []  # no config file: nothing to parse (tomllib compiles regexes at import)
    import tomllib

    from ..paths import read_small_file

    data = tomllib.loads(read_small_file(path).decode())
    entries: object = data.get("mcp_servers", [])
    return entries


def _load(path: str) -> list[ServerSpec]:
    """``[[mcp_servers]]`` of the config file; a bad entry is said on stderr and left out."""
    from .specs import SpecError, parse_server

    try:
        entries = _configured_entries(path)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        log.error("cannot read MCP servers from %s: %s", path, exc)
        return []
    if not isinstance(entries, list):
        log.error("%s: mcp_servers must be an array of tables ([[mcp_servers]])", path)
        return []
    out: list[ServerSpec] = []
    for i, entry in enumerate(entries):
        try:
            out.append(parse_server(entry, f"mcp_servers[{i}]", origin="config"))
        except SpecError as exc:
            log.error("%s: %s; that server is left out", path, exc)
    return out
