"""The ACP agent side: method handlers on top of sessions and turns."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from .. import __version__
from ..jsonrpc.connection import Connection, Reply, current_reply
from ..jsonrpc.errors import RequestId, RpcError
from ..log.lock import SessionLocked
from ..log.logfile import LogFileLost
from ..log.reader import session_path
from ..log.writer import SessionLog
from ..loop.session import Session
from ..loop.turn import Turn, TurnConfig
from ..loop.updates import UpdateFrames
from ..mcp.hub import CAPABILITIES as MCP_CAPABILITIES
from ..mcp.hub import McpHub
from ..paths import create_private_file, make_private_dirs
from ..providers.base import Provider
from ..transport.outbox import Outbox
from . import config_options
from . import params as P
from .auth import AuthMethods
from .sessions import (
    SESSION_CAPABILITIES,
    SessionMethods,
    locked_error,
    require_directory,
)

log = logging.getLogger("acp_bridge.agent")

PROTOCOL_VERSION = 1

Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]


class Agent:
    def __init__(
        self,
        conn: Connection,
        outbox: Outbox,
        *,
        state_dir: str,
        config: TurnConfig,
        spawn: Spawn,
    ) -> None:
        self.conn = conn
        self.outbox = outbox
        self.state_dir = state_dir
        self._provider_factory: Callable[[], Provider] | None = None
        self._provider_ready = anyio.Event()
        self.config = config
        self.spawn = spawn
        self.sessions: dict[str, Session] = {}
        # Set when the server shuts down: queued prompts start no turn.
        self.closing = False
        # Turn tasks still running, including any abandoned at the deadline.
        self.running: set[Turn] = set()
        # From initialize, for the session/start records.
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] | None = None
        # The MCP servers of the sessions (acp_bridge.mcp).
        self.mcp = McpHub(spawn)
        conn.requests.update(
            {
                "initialize": self.initialize,
                "session/new": self.new_session,
                "session/prompt": self.prompt,
                "session/set_config_option": self.set_config_option,
                "session/set_mode": self.set_mode,
            }
        )
        conn.notifications["session/cancel"] = self.cancel
        conn.requests["session/cancel"] = _cancel_is_a_notification
        conn.cancel_hooks["session/prompt"] = self._cancel_request
        conn.arrival_hooks["session/prompt"] = self._prompt_arrived
        # load, resume, list, close, delete, fork, regenerate, and the locks.
        self.stored = SessionMethods(self)
        # authenticate, logout, and the -32000 while no provider can start.
        self.auth = AuthMethods(self)

    def set_provider_factory(self, factory: Callable[[], Provider]) -> None:
        self._provider_factory = factory
        self._provider_ready.set()

    def needs_auth(self, reason: str) -> None:
        """No provider can start until the user sets one up (``reason`` says how)."""
        self.set_provider_factory(self.auth.needs_auth(reason))

    async def reload_provider(self) -> None:
        """Load the provider's configuration again (after setup or logout)."""
        await self._provider_ready.wait()
        await self.auth.reload_now()

    async def check_provider(self) -> None:
        """Load the provider again, then raise the error a new session would get
        now, if any: the factory makes a provider, which sends no request."""
        await self.reload_provider()
        assert self._provider_factory is not None
        self._provider_factory()

    # -- initialize ----------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        P.protocol_version(params)
        # Recorded in each new session's log (session/start).
        self.client_capabilities = P.optional(params, "clientCapabilities", dict)
        self.client_info = P.optional(params, "clientInfo", dict)
        # We speak version 1 only: the same version if asked for it, else our
        # latest.
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": dict(MCP_CAPABILITIES),
                "sessionCapabilities": SESSION_CAPABILITIES,
                **self.auth.capabilities(),
            },
            "authMethods": self.auth.methods(self.client_capabilities),
            "agentInfo": {"name": "acp-bridge", "title": "acp-bridge", "version": __version__},
        }

    # -- sessions --------------------------------------------------------------

    async def new_provider(self) -> Provider:
        """A provider for a new or reopened session, once start-up has made the factory."""
        await self._provider_ready.wait()
        if self.auth.missing is not None:
            await self.auth.reload_now()  # set up meanwhile?
        assert self._provider_factory is not None
        return self._provider_factory()

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
        from ..context.session import cost_so_far
        from ..log.compaction import opted_in
        from . import tool_session  # the tools load off the start-up path

        session = Session(session_id, cwd, slog, provider, self.outbox, UpdateFrames(session_id))
        session.tools = tool_session.tool_state(self, session, extra_dirs, records or ())
        context = session.context
        context.additional_directories = tuple(extra_dirs or ())
        context.compaction_updates = opted_in(self.client_capabilities)
        context.cost, context.currency = cost_so_far(records or ())
        return session

    async def prepare_context(self, session: Session) -> None:
        """Build the session's system prompt now (reading its instruction files), so
        that its first turn goes straight to the model."""
        # The tools themselves, not their specs: building JSON Schemas can wait.
        await session.context.system_prompt(() if session.tools is None else session.tools.registry)

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.absolute_path(params, "cwd")
        extra_dirs = P.additional_directories(params)
        self.mcp.editor_specs(params)  # checked before anything is created
        await require_directory(cwd, "cwd")
        # The provider first: if it cannot start, the editor is told why and
        # no session file is left behind.
        provider = await self.new_provider()
        session_id = "sess_" + uuid.uuid4().hex
        path = session_path(self.state_dir, session_id)
        try:
            make_private_dirs(os.path.dirname(path))
            create_private_file(path)
        except OSError as exc:
            log.error("cannot create the session log %s: %s", path, exc.strerror or exc)
            raise RpcError(
                -32603, f"Cannot create the session log: {exc.strerror or exc}", {"path": path}
            ) from exc
        self.stored.lock(session_id, path)
        slog = SessionLog(path, self.outbox)
        session = self.make_session(session_id, cwd, slog, provider, extra_dirs)
        await self.prepare_context(session)
        meta: dict[str, Any] = {}
        if extra_dirs is not None:
            meta["additional_directories"] = extra_dirs
        if self.client_info is not None:
            meta["client_info"] = self.client_info
        if self.client_capabilities is not None:
            meta["client_capabilities"] = self.client_capabilities
        slog.append(
            "session/start",
            0,
            0,
            session_id=session_id,
            cwd=cwd,
            provider=provider.name,
            title=None,
            **meta,
        )
        await self.mcp.attach(session, params)
        self.sessions[session_id] = session
        slog.sync()
        await self.mcp.ready(session)
        from . import tool_session

        result = {"sessionId": session_id, **tool_session.new_session_fields(session)}
        return self.mcp.answer(session, result)

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        from . import tool_session  # the tools load off the start-up path

        session = self._session(params)
        if params.get("configId") == tool_session.MODE_OPTION:
            return tool_session.set_mode_option(session, params)
        config_options.set_option(session.provider, params)
        return {"configOptions": tool_session.config_options_of(session)}

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        from . import tool_session  # the tools load off the start-up path

        return tool_session.set_mode(self._session(params), params)

    def _session(self, params: dict[str, Any]) -> Session:
        session_id = P.session_id(params)
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.invalid_params(
                "sessionId", f"no session {P.echo(session_id)} in this process"
            )
        return session

    # -- prompt turns ----------------------------------------------------------
    # The connection hooks and handlers below are entry points only: the
    # bookkeeping of a session's prompts lives in its PromptQueue.

    def _session_of(self, params: dict[str, Any]) -> Session | None:
        session_id = params.get("sessionId")
        return self.sessions.get(session_id) if isinstance(session_id, str) else None

    def _prompt_arrived(self, request_id: RequestId, params: dict[str, Any]) -> None:
        session = self._session_of(params)
        if session is not None:
            session.prompts.arrived(request_id)

    async def prompt(self, params: dict[str, Any]) -> None:
        reply = current_reply.get()
        session = self._session(params)
        try:
            blocks = P.prompt_blocks(params, embedded_context=True, image=True)
            config_options.check_prompt(session.provider, blocks)
        except RpcError:
            session.prompts.withdraw(reply.id)
            raise
        if self.stored.is_regenerate(blocks):
            return await self.stored.run_regenerate(reply, session, params["prompt"])
        instructions = self.stored.compact_instructions(blocks)
        if instructions is not None:
            return await self.stored.run_compact(reply, session, params["prompt"], instructions)
        await self.run_prompt(reply, session, blocks, params["prompt"])
        return None

    async def run_prompt(
        self,
        reply: Reply,
        session: Session,
        blocks: list[dict[str, Any]],
        raw: list[dict[str, Any]],
        prepare: Callable[[Turn], None] | None = None,
    ) -> None:
        """Queue a turn for ``session``, run it, and answer ``reply`` when it ends
        (``prepare`` adjusts the turn before it starts: a regenerate's recorder)."""

        try:
            host = _PromptHost(self, reply, session, blocks, prepare)
            turn = await session.prompts.run(reply.id, blocks, raw, host)
        except RpcError:
            raise  # refused before it started: the error is the answer
        except BaseException:
            reply.result({"stopReason": "cancelled"})  # torn down (shutdown)
            raise
        # The turn answered when it ended; this covers a prompt that started
        # no turn (shutdown) or one that never ended.  A second answer is dropped.
        reply.result({"stopReason": "cancelled"})
        if turn is not None:
            # What the turn logged is queued: this fsync covers all of it.
            session.log.sync()

    def _answer(self, reply: Reply, session: Session, turn: Turn) -> None:
        if turn.error is not None:
            reply.error(turn.error)
        else:
            result: dict[str, Any] = {"stopReason": turn.stop_reason}
            # Write the turn's records now, so a failure shows in this answer.
            self.outbox.write_log_now(session.log.file)
            if session.log.file.error is not None:
                result["_meta"] = {"acpBridge": {"logError": session.log.file.error}}
            reply.result(result)
        self.outbox.flush_now()  # someone is waiting for this answer

    def _check_log_writable(self, session: Session) -> None:
        """Refuse a new turn while its records could not reach the log.

        The log is the session's only source of truth.  Before anything of the
        turn is sent, the file is checked (`LogTarget.verify`: still there,
        the same file, unchanged since this process wrote it, its lock ours)
        and the records that could not be written earlier are retried; while
        that fails, the editor gets an error that says why, and nothing starts.
        """
        file = session.log.file
        try:
            self.outbox.check_log(file)
        except SessionLocked as exc:
            raise locked_error(session.id, exc) from None
        except LogFileLost as exc:
            raise RpcError(
                -32603,
                f"The session log can no longer be written: {exc.strerror}. Nothing more is "
                "written to it; what it could not take is saved beside it when acp-bridge exits.",
                {"path": file.path, "kind": "log_lost", "pendingBytes": len(file.pending)},
            ) from None
        except OSError as exc:
            raise RpcError(
                -32603,
                f"Cannot write the session log ({exc.strerror or exc}); the conversation so far "
                "is kept in memory and will be written when the disk accepts it. "
                "Free space or fix permissions, then send the prompt again.",
                {"path": file.path, "pendingBytes": len(file.pending)},
            ) from exc

    def cancel(self, params: dict[str, Any]) -> None:
        session = self.sessions.get(P.session_id(params))
        if session is None:
            return  # harmless for an unknown session (invariant I6)
        session.prompts.cancel(self.spawn)

    def _cancel_request(self, request_id: RequestId, params: dict[str, Any]) -> None:
        """``$/cancel_request`` for one prompt: that prompt only, not the session."""
        session = self._session_of(params)
        if session is not None:
            session.prompts.cancel_request(request_id, self.spawn)

    def _run_turn(self, turn: Turn) -> Callable[[], Coroutine[Any, Any, None]]:
        async def run() -> None:
            self.running.add(turn)
            try:
                await turn.run()
            finally:
                self.running.discard(turn)

        return run

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


class _PromptHost:
    """What the queue needs for one prompt's turn (`acp_bridge.loop.prompts.PromptHost`)."""

    def __init__(
        self,
        agent: Agent,
        reply: Reply,
        session: Session,
        blocks: list[dict[str, Any]],
        prepare: Callable[[Turn], None] | None,
    ) -> None:
        self.config, self.spawn = agent.config, agent.spawn
        self._agent, self._reply, self._session = agent, reply, session
        self._blocks, self._prepare = blocks, prepare

    def before_start(self) -> bool:
        agent = self._agent
        if agent.closing:
            # The editor is gone or we were told to stop: start nothing.
            return False
        agent._check_log_writable(self._session)
        if not agent.stored.before_turn(self._session, self._blocks):
            return False
        agent.mcp.before_turn(self._session, self._blocks)
        return True

    def prepare(self, turn: Turn) -> None:
        if self._prepare is not None:
            self._prepare(turn)  # e.g. a regenerate turn's own recorder

    def run_turn(self, turn: Turn) -> Callable[[], Coroutine[Any, Any, None]]:
        return self._agent._run_turn(turn)

    def answer(self, turn: Turn) -> None:
        self._agent._answer(self._reply, self._session, turn)


async def _cancel_is_a_notification(params: dict[str, Any]) -> None:
    raise RpcError.invalid_request(
        "session/cancel is a notification: send it without an id (nothing was cancelled)"
    )
