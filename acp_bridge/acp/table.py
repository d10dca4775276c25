"""The session table: every session open in this process, and what both kinds
of handler need of it.

The live methods (`acp_bridge.acp.live`: new, prompt, cancel, modes, config)
and the stored ones (`acp_bridge.acp.stored`: load, resume, list, close,
delete, fork, regenerate) are independent of each other; both work on this
table: making a session (its provider, tools and context), finding one by the
request's ``sessionId``, locking its log, closing it, and stopping all at
shutdown.  A session open here holds the lock of its log file
(`acp_bridge.log.writer.files`), so two processes never append to one log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.to_thread

from ..errors import LogNotCreated, LogNotLocked, SessionBusy, SessionLockedElsewhere
from ..jsonrpc.connection import Connection
from ..jsonrpc.errors import RpcError
from ..log.reader import session_path
from ..log.writer import SessionLog
from ..log.writer.files import LogFile
from ..log.writer.lock import SessionLocked
from ..loop.session import Session
from ..loop.turn import Turn, TurnConfig
from ..mcp.hub import McpHub
from ..paths import create_private_file, make_private_dirs
from ..protocol import V1, Dialect
from ..protocol.answers import new_session_id
from ..providers.base import Provider
from ..transport.outbox import Outbox
from . import params as P
from .provider_slot import ProviderSlot

__all__ = ["SessionTable", "Spawn", "require_directory"]

log = logging.getLogger("acp_bridge.sessions")

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class SessionTable:
    def __init__(
        self,
        conn: Connection,
        outbox: Outbox,
        *,
        state_dir: str,
        config: TurnConfig,
        spawn: Spawn,
        providers: ProviderSlot,
    ) -> None:
        self.conn = conn
        self.outbox = outbox
        self.state_dir = state_dir
        self.config = config
        self.spawn = spawn
        self.providers = providers
        self.sessions: dict[str, Session] = {}
        # Running subagent sessions the client was told of, which it may
        # cancel alone (`acp_bridge.acp.subagents`).
        self.children: dict[str, Session] = {}
        # The places for subagent sessions running at once (--subagents-at-once).
        self.subagent_places = anyio.Semaphore(config.subagents_at_once)
        # Set when the server shuts down: queued prompts start no turn.
        self.closing = False
        # Turn tasks still running, including any abandoned at the deadline.
        self.running: set[Turn] = set()
        # The connection's protocol dialect, chosen at initialize (v1 until then).
        self.dialect: Dialect = V1
        # From initialize, for the session/start records.
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] | None = None
        # The log file of each session this process has locked.
        self.locks: dict[str, LogFile] = {}
        # Sessions that were shown the available commands in this process.
        self.announced: set[str] = set()
        # The MCP servers of the sessions (acp_bridge.mcp).
        self.mcp = McpHub(spawn)

    # -- finding a session -------------------------------------------------------

    def get(self, params: dict[str, Any]) -> Session:
        """The open session ``params`` name; ``-32602`` if there is none."""
        session_id = P.session_id(params)
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.invalid_params(
                "sessionId", f"no session {P.echo(session_id)} in this process"
            )
        return session

    def find(self, params: dict[str, Any]) -> Session | None:
        """The open session ``params`` name, if any (no validation: for hooks)."""
        session_id = params.get("sessionId")
        return self.sessions.get(session_id) if isinstance(session_id, str) else None

    # -- making a session --------------------------------------------------------

    def make_session(
        self,
        session_id: str,
        cwd: str,
        slog: SessionLog,
        provider: Provider,
        extra_dirs: list[str] | None,
        records: list[dict[str, Any]] | None = None,
    ) -> Session:
        """A session with its tools (as ``records`` of its log left them, if reopened)."""
        # Loaded off the start-up path (see `acp_bridge.server`).
        from ..compaction.shown import opted_in
        from ..context.state import cost_so_far
        from . import tool_setup

        frames = self.dialect.session_frames(session_id)
        session = Session(session_id, cwd, slog, provider, self.outbox, frames)
        session.tools = tool_setup.tool_state(self, session, extra_dirs, records or ())
        context = session.context
        context.additional_directories = tuple(extra_dirs or ())
        # The updates it takes that a client opts in to (v2: all of them).
        capabilities = self.dialect.opt_ins(self.client_capabilities)
        context.compaction_updates = opted_in(capabilities)
        from ..notices import wants_notices

        context.notices = wants_notices(capabilities)
        context.cost, context.currency = cost_so_far(records or ())
        return session

    async def prepare_context(self, session: Session) -> None:
        """Build the session's system prompt now (reading its instruction files), so
        that its first turn goes straight to the model."""
        # The tools themselves, not their specs: building JSON Schemas can wait.
        await session.context.system_prompt(session.tools.registry)
        from . import tool_setup

        await tool_setup.add_project_rules(self, session)

    async def new_log(self) -> tuple[str, SessionLog]:
        """A new session's id and its log, the file created (0600) and locked."""
        session_id = new_session_id()
        path = session_path(self.state_dir, session_id)
        try:
            await anyio.to_thread.run_sync(_create_file, path)
        except OSError as exc:
            log.error("cannot create the session log %s: %s", path, exc.strerror or exc)
            raise LogNotCreated(path, f"{exc.strerror or exc}") from exc
        self.lock(session_id, path)
        return session_id, SessionLog(path, self.outbox)

    # -- locks -------------------------------------------------------------------

    def lock(self, session_id: str, path: str) -> None:
        """Open and lock the log of a session this process is about to read and
        write (`acp_bridge.log.writer.files.LogFiles.claim`)."""
        try:
            self.locks[session_id] = self.outbox.logs.claim(path)
        except SessionLocked as exc:
            if session_id in self.locks:
                # Ours: a subagent session running in this process.
                raise SessionBusy(session_id, "opened or deleted") from None
            raise SessionLockedElsewhere(session_id, exc.holder) from None
        except OSError as exc:
            raise LogNotLocked(path, str(exc.strerror or exc)) from exc

    def unlock(self, session_id: str) -> None:
        file = self.locks.pop(session_id, None)
        if file is not None:
            self.outbox.logs.release(file)

    # -- closing -----------------------------------------------------------------

    async def close(self, session: Session) -> None:
        """Stop the session's running and queued prompts, then free it."""
        # Gone from the table first: a queued prompt then starts nothing.
        self.sessions.pop(session.id, None)
        session.prompts.cancel(self.spawn, "user")
        active = session.prompts.active
        if active is not None:
            await active.settled.wait()
        await self.mcp.close(session.id)
        session.log.sync()
        await self.outbox.drain()
        session.log.file.close()
        self.announced.discard(session.id)
        self.unlock(session.id)

    def stuck_turns(self) -> int:
        """Turns abandoned at the cancel deadline whose task has still not returned."""
        return sum(1 for turn in self.running if turn.forced)

    async def shutdown(self, cause: str) -> None:
        """Stop every running turn as ``cause`` and wait until all are settled."""
        self.closing = True
        turns = [s.prompts.active for s in self.sessions.values() if s.prompts.active]
        for session in self.sessions.values():
            session.prompts.cancel(self.spawn, cause)
        for turn in turns:
            await turn.settled.wait()
        await self.mcp.close_all()


def _create_file(path: str) -> None:
    make_private_dirs(os.path.dirname(path))
    create_private_file(path)


async def require_directory(path: str, field: str) -> None:
    """A new session's working directory must exist: else ``-32602`` naming ``field``.

    (A session whose cwd is missing could run no tool there, and would only
    fail later, at the first tool call.)  Checked in a worker thread: a
    stat may block.
    """
    if not await anyio.to_thread.run_sync(os.path.isdir, path):
        raise RpcError.invalid_params(field, f"must be an existing directory, got {P.echo(path)}")
