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
from ..log.reader import session_path
from ..log.writer import SessionLog
from ..loop.session import Session
from ..loop.turn import Turn, TurnConfig
from ..loop.updates import UpdateFrames
from ..paths import create_private_file, make_private_dirs
from ..providers.base import Provider
from ..transport.outbox import Outbox
from . import params as P

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
        conn.requests.update(
            {
                "initialize": self.initialize,
                "session/new": self.new_session,
                "session/prompt": self.prompt,
            }
        )
        conn.notifications["session/cancel"] = self.cancel
        conn.requests["session/cancel"] = _cancel_is_a_notification
        conn.cancel_hooks["session/prompt"] = self._cancel_request
        conn.arrival_hooks["session/prompt"] = self._prompt_arrived

    def set_provider_factory(self, factory: Callable[[], Provider]) -> None:
        self._provider_factory = factory
        self._provider_ready.set()

    # -- initialize ----------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if version is None:
            raise RpcError.invalid_params("protocolVersion", "is required")
        if isinstance(version, bool) or not isinstance(version, int | str):
            raise RpcError.invalid_params("protocolVersion", "must be an integer")
        P.optional(params, "clientCapabilities", dict)
        P.optional(params, "clientInfo", dict)
        # We speak version 1 only: the same version if asked for it, else our
        # latest (a legacy string version from old clients also gets 1).
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
            },
            "authMethods": [],
            "agentInfo": {"name": "acp-bridge", "title": "acp-bridge", "version": __version__},
        }

    # -- sessions --------------------------------------------------------------

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.absolute_path(params, "cwd")
        servers = P.mcp_servers(params)
        if servers:
            log.warning("MCP servers are not supported yet; ignoring %d server(s)", len(servers))
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
        await self._provider_ready.wait()
        assert self._provider_factory is not None
        provider = self._provider_factory()
        slog = SessionLog(path, self.outbox)
        session = Session(session_id, cwd, slog, provider, self.outbox, UpdateFrames(session_id))
        slog.append("session/start", 0, 0, session_id=session_id, cwd=cwd, provider=provider.name)
        self.sessions[session_id] = session
        slog.sync()
        return {"sessionId": session_id}

    def _session(self, params: dict[str, Any]) -> Session:
        session_id = P.session_id(params)
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError.invalid_params("sessionId", f"no session {session_id!r} in this process")
        return session

    # -- prompt turns ----------------------------------------------------------

    def _prompt_arrived(self, request_id: RequestId, params: dict[str, Any]) -> None:
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None:
            session.waiting[request_id] = False

    async def prompt(self, params: dict[str, Any]) -> None:
        reply = current_reply.get()
        request_id = reply.id
        session = self._session(params)
        try:
            blocks = P.prompt_blocks(params, embedded_context=True, image=False)
        except RpcError:
            session.waiting.pop(request_id, None)
            raise
        async with session.lock:
            cancelled_early = session.waiting.pop(request_id, False)
            if self.closing:
                # The editor is gone or we were told to stop: start nothing.
                reply.result({"stopReason": "cancelled"})
                return None
            self._check_log_writable(session)
            session.turns += 1
            turn = Turn(session, session.turns, blocks, self.config, self.spawn)
            session.active = turn
            turn.request_id = request_id
            if cancelled_early:
                # A cancel arrived before this turn could start: it still
                # records the user's message, then ends as cancelled.
                turn.cancel("user")
            # Answer the moment the turn settles: its updates and records are
            # already queued ahead of the answer on the one ordered writer.
            turn.on_settled = lambda: self._answer(reply, session, turn)
            self.spawn(self._run_turn(turn))
            try:
                await turn.settled.wait()
            finally:
                session.active = None
                if not turn.settled.is_set():
                    # This handler is being torn down (shutdown): stop the turn
                    # as a disconnect and give it the deadline to record that.
                    turn.cancel("disconnected")
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(self.config.cancel_deadline),
                    ):
                        await turn.settled.wait()
                    reply.result({"stopReason": "cancelled"})  # if it never settled
        # The turn answered when it settled (on_settled); what it logged is
        # now queued, so this fsync covers all of it.
        session.log.sync()
        return None

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
        """Refuse a new turn while earlier records cannot reach the disk.

        The log is the session's only source of truth: the records that could
        not be written are kept in memory and retried here; while that still
        fails, the editor gets an error that says why, and nothing new starts.
        """
        file = session.log.file
        if file.error is None:
            return
        try:
            file.write(b"")
        except OSError as exc:
            raise RpcError(
                -32603,
                f"Cannot write the session log ({exc.strerror or exc}); the conversation so far "
                "is kept in memory and will be written when the disk accepts it. "
                "Free space or fix permissions, then send the prompt again.",
                {"path": file.path, "pendingBytes": len(file.pending)},
            ) from exc
        file.error = None

    def cancel(self, params: dict[str, Any]) -> None:
        session = self.sessions.get(P.session_id(params))
        if session is None:
            return  # harmless for an unknown session (invariant I6)
        for request_id in session.waiting:
            session.waiting[request_id] = True
        # An idle session keeps no sticky flag: only prompts already received
        # are cancelled.
        if session.active is not None:
            self._stop(session.active, "user")

    def _cancel_request(self, request_id: RequestId, params: dict[str, Any]) -> None:
        """``$/cancel_request`` for one prompt: that prompt only, not the session."""
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            return
        if request_id in session.waiting:
            session.waiting[request_id] = True
        turn = session.active
        if turn is not None and turn.request_id == request_id:
            self._stop(turn, "user")

    def _stop(self, turn: Turn, cause: str) -> None:
        """Stop a turn; if it does not settle at once, the watchdog bounds the wait."""
        if turn.cancel(cause) and not turn.settled.is_set():
            self.spawn(turn.watchdog)

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
        turns = [s.active for s in self.sessions.values() if s.active is not None]
        for turn in turns:
            self._stop(turn, cause)
        for turn in turns:
            await turn.settled.wait()


async def _cancel_is_a_notification(params: dict[str, Any]) -> None:
    raise RpcError.invalid_request(
        "session/cancel is a notification: send it without an id (nothing was cancelled)"
    )
