"""The ACP methods of stored sessions: load, resume, list, close, delete, fork,
and the ``_acp-bridge/fork_at_turn`` and ``_acp-bridge/regenerate`` extensions.

A session open in this process holds the lock of its log file (see
`acp_bridge.log.logfile`), so two processes never append to one log.  Opening
a stored session goes through `acp_bridge.log.reopen.reopen` (a torn line cut,
a turn left open by a crash closed as ``crashed``), and ``session/load`` replays
`acp_bridge.log.replay.replay_updates` of the log before it answers.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import orjson

from ..jsonrpc.connection import Reply, current_reply
from ..jsonrpc.errors import RpcError
from ..log.lock import SessionLocked
from ..log.logfile import LogFile
from ..log.reader import LogCorrupt, session_path
from ..log.reopen import reopen
from ..log.replay import commands_update, replay_updates, title_from_prompt, title_update
from ..log.upcast import gc_paused, load_log
from ..loop.session import Session
from ..loop.turn import Turn
from ..sessions.fork import ForkError, fork_records
from ..sessions.info import PAGE_SIZE, BadCursor, list_sessions, title_of
from ..sessions.regenerate import RegenerateRecorder, is_command, target_turn
from . import params as P

if TYPE_CHECKING:
    from .agent import Agent

log = logging.getLogger("acp_bridge.sessions")


async def require_directory(path: str, field: str) -> None:
    """A new session's working directory must exist: else ``-32602`` naming ``field``.

    (A session whose cwd is missing could run no tool there, and would only
    fail later, at the first tool call.)  Checked in a worker thread: a
    stat may block.
    """
    if not await anyio.to_thread.run_sync(os.path.isdir, path):
        raise RpcError.invalid_params(field, f"must be an existing directory, got {P.echo(path)}")

FORK_AT_TURN: Final = "_acp-bridge/fork_at_turn"
REGENERATE: Final = "_acp-bridge/regenerate"
ENV_PAGE_SIZE: Final = "ACP_BRIDGE_LIST_PAGE_SIZE"

SESSION_CAPABILITIES: Final[dict[str, dict[str, Any]]] = {
    "list": {},
    "resume": {},
    "close": {},
    "delete": {},
    "fork": {},
}

Record = dict[str, Any]


class SessionMethods:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        # The log file of each session this process has locked.
        self.locks: dict[str, LogFile] = {}
        # Sessions that were shown the available commands in this process.
        self.announced: set[str] = set()
        agent.conn.requests.update(
            {
                "session/load": self.load,
                "session/resume": self.resume,
                "session/list": self.list_sessions,
                "session/close": self.close,
                "session/delete": self.delete,
                "session/fork": self.fork,
                FORK_AT_TURN: self.fork_at_turn,
                REGENERATE: self.regenerate,
            }
        )

    # -- locks and opening -------------------------------------------------------

    def lock(self, session_id: str, path: str) -> None:
        """Open and lock the log of a session this process is about to read and
        write (`acp_bridge.log.logfile.LogFiles.claim`)."""
        try:
            self.locks[session_id] = self.agent.outbox.logs.claim(path)
        except SessionLocked as exc:
            raise locked_error(session_id, exc) from None
        except OSError as exc:
            raise RpcError(
                -32603, f"Cannot lock the session: {exc.strerror or exc}", {"path": path}
            ) from exc

    def _unlock(self, session_id: str) -> None:
        file = self.locks.pop(session_id, None)
        if file is not None:
            self.agent.outbox.logs.release(file)

    def _stored_path(self, session_id: str) -> str:
        try:
            path = session_path(self.agent.state_dir, session_id)
        except ValueError:
            raise RpcError.invalid_params("sessionId", "is not a valid session id") from None
        if not os.path.isfile(path):
            raise RpcError.invalid_params("sessionId", f"no stored session {session_id!r}")
        return path

    async def _open(self, params: dict[str, Any]) -> tuple[Session, list[Record], bool]:
        """The session of a load or resume, opened from its log if not open here.

        Returns the session, its records, and whether it was opened now.
        """
        agent = self.agent
        session_id = P.session_id(params)
        cwd = P.absolute_path(params, "cwd")
        agent.mcp.editor_specs(params)  # checked before the session is opened
        session = agent.sessions.get(session_id)
        if session is not None:
            if session.prompts.active is not None or session.prompts.waiting:
                raise _busy(session_id, "loaded again")
            await agent.outbox.drain()
            return session, self._read(session.log.path).records, False
        path = self._stored_path(session_id)
        self.lock(session_id, path)
        try:
            reopened = reopen(path, agent.outbox)
        except LogCorrupt as exc:
            self._unlock(session_id)
            raise RpcError(
                -32603,
                f"The session log is damaged and cannot be loaded: {exc.reason}",
                {"path": exc.path, "line": exc.line_no},
            ) from None
        except BaseException:
            self._unlock(session_id)
            raise
        if reopened.closed:
            log.warning(
                "session %s: its last turn was left open (the agent stopped); closed it as %s",
                session_id,
                reopened.closed[-1].get("reason"),
            )
        session = await self._register(session_id, cwd, reopened.log, reopened.records)
        session.prompts.turns = _last_turn(reopened.records)
        return session, reopened.records, True

    def _read(self, path: str) -> Any:
        try:
            return load_log(path)
        except LogCorrupt as exc:
            raise RpcError(
                -32603,
                f"The session log is damaged: {exc.reason}",
                {"path": exc.path, "line": exc.line_no},
            ) from None

    async def _register(
        self, session_id: str, cwd: str, slog: Any, records: list[Record]
    ) -> Session:
        agent = self.agent
        provider = await agent.new_provider()
        # Tools as the log left them: the last mode and the remembered choices.
        start = next((r for r in records if r.get("type") == "session/start"), {})
        dirs = start.get("additional_directories")
        extra = [d for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else None
        session = agent.make_session(session_id, cwd, slog, provider, extra, records)
        agent.sessions[session_id] = session
        await agent.prepare_context(session)
        return session

    def _options(self, session: Session) -> dict[str, Any]:
        """``modes`` and ``configOptions``, as a ``session/new`` answer has them."""
        from . import tool_session

        return tool_session.new_session_fields(session)

    # -- load and resume ---------------------------------------------------------

    async def load(self, params: dict[str, Any]) -> dict[str, Any]:
        session, records, opened = await self._open(params)
        await self.agent.mcp.attach(session, params)
        if not opened:
            session.context.reload()  # the instruction files are read again
            await self.agent.prepare_context(session)
        self.agent.outbox.widen_stdout()  # a bulk write: no Stop waits behind it
        send = self.agent.outbox.send
        replayed = False
        frame = session.frames.update
        compaction = session.context.compaction_updates
        with gc_paused():
            for item in replay_updates(records, compaction=compaction):
                update = item["update"]
                if update["sessionUpdate"] == "available_commands_update":
                    replayed = True
                send(frame(update))
        if not replayed:
            send(session.frames.update(commands_update()))
        self.announced.add(session.id)
        await self.agent.mcp.ready(session)
        result = {**self._options(session), "_meta": {"acpBridge": {"turns": _endings(records)}}}
        return self.agent.mcp.answer(session, result)

    async def resume(self, params: dict[str, Any]) -> dict[str, Any]:
        session, records, _ = await self._open(params)
        await self.agent.mcp.attach(session, params)
        # No replay: only what the editor needs to use the session again.
        send = self.agent.outbox.send
        send(session.frames.update(commands_update()))
        title = title_of(records)
        if title is not None:
            send(session.frames.update(title_update(title)))
        self.announced.add(session.id)
        await self.agent.mcp.ready(session)
        result = {**self._options(session), "_meta": {"acpBridge": {"turns": _endings(records)}}}
        return self.agent.mcp.answer(session, result)

    def before_turn(self, session: Session, blocks: list[dict[str, Any]]) -> bool:
        """Called just before a turn of ``session`` starts; False: start nothing.

        The first turn of a session (in this process) announces the commands;
        the session's first prompt gives it its title.
        """
        if self.agent.sessions.get(session.id) is not session:
            return False  # closed meanwhile
        send = self.agent.outbox.send
        if session.prompts.turns == 0 and blocks:
            send(session.frames.update(commands_update()))
            self.announced.add(session.id)
            title = title_from_prompt(blocks)
            if title is not None:
                send(session.frames.update(title_update(title)))
        elif session.id not in self.announced:
            send(session.frames.update(commands_update()))
            self.announced.add(session.id)
        return True

    # -- list, close, delete -----------------------------------------------------

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.optional(params, "cwd", str)
        cursor = P.optional(params, "cursor", str)
        page_size = _page_size()
        state_dir = self.agent.state_dir
        try:
            page = await anyio.to_thread.run_sync(
                lambda: list_sessions(state_dir, cwd=cwd, cursor=cursor, page_size=page_size)
            )
        except BadCursor as exc:
            raise RpcError.invalid_params("cursor", str(exc)) from None
        out: dict[str, Any] = {"sessions": [head.info() for head in page.sessions]}
        if page.next_cursor is not None:
            out["nextCursor"] = page.next_cursor
        return out

    async def close(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.agent._session(params)
        await self._close(session)
        return {}

    async def _close(self, session: Session) -> None:
        """Stop the session's running and queued prompts, then free it."""
        agent = self.agent
        # Gone from the table first: a queued prompt then starts nothing.
        agent.sessions.pop(session.id, None)
        session.prompts.cancel(agent.spawn, "user")
        active = session.prompts.active
        if active is not None:
            await active.settled.wait()
        await agent.mcp.close(session.id)
        session.log.sync()
        await agent.outbox.drain()
        session.log.file.close()
        self.announced.discard(session.id)
        self._unlock(session.id)

    async def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = P.session_id(params)
        session = self.agent.sessions.get(session_id)
        if session is not None:
            await self._close(session)
        path = self._stored_path(session_id)
        self.lock(session_id, path)
        try:
            os.unlink(path)
        finally:
            self._unlock(session_id)
        # The lock file that earlier versions kept beside the log.
        with contextlib.suppress(OSError):
            os.unlink(path.removesuffix(".jsonl") + ".lock")
        return {}

    # -- fork --------------------------------------------------------------------

    async def fork(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.absolute_path(params, "cwd")
        await require_directory(cwd, "cwd")
        ignore_mcp_servers(params)
        dirs = P.additional_directories(params)
        return await self._fork(P.session_id(params), cwd, None, dirs)

    async def fork_at_turn(self, params: dict[str, Any]) -> dict[str, Any]:
        turn = P.require(params, "turn", int)
        if turn < 1:
            raise RpcError.invalid_params("turn", "must be a turn number (1 or more)")
        cwd = None if params.get("cwd") is None else P.absolute_path(params, "cwd")
        if cwd is not None:
            await require_directory(cwd, "cwd")
        return await self._fork(P.session_id(params), cwd, turn, None)

    async def _fork(
        self, source_id: str, cwd: str | None, turn: int | None, dirs: list[str] | None
    ) -> dict[str, Any]:
        agent = self.agent
        source_path = self._stored_path(source_id)
        if source_id in agent.sessions:
            await agent.outbox.drain()
        loaded = self._read(source_path)
        start: Record = next(
            (r for r in loaded.records if r.get("type") == "session/start"), {}
        )
        cwd = cwd if cwd is not None else start.get("cwd")
        if not isinstance(cwd, str):
            raise RpcError.invalid_params("cwd", "is required (the source session has none)")
        session_id = "sess_" + uuid.uuid4().hex
        try:
            records = fork_records(
                loaded.records,
                session_id=session_id,
                cwd=cwd,
                upto_turn=turn,
                at=time.time(),
                additional_directories=dirs,
            )
        except ForkError as exc:
            raise RpcError.invalid_params("turn", str(exc)) from None
        path = session_path(agent.state_dir, session_id)
        # Written first, then locked (the lock is the log's own): nobody else
        # knows the new id yet.
        await anyio.to_thread.run_sync(_write_new_log, path, records)
        self.lock(session_id, path)
        try:
            reopened = reopen(path, agent.outbox)
        except BaseException:
            self._unlock(session_id)
            raise
        session = await self._register(session_id, cwd, reopened.log, records)
        session.prompts.turns = _last_turn(records)
        parent = records[0]["parent"]
        return {
            "sessionId": session_id,
            **self._options(session),
            "_meta": {"acpBridge": {"parent": {"sessionId": source_id, "turn": parent["turn"]}}},
        }

    # -- regenerate --------------------------------------------------------------

    async def regenerate(self, params: dict[str, Any]) -> None:
        reply = current_reply.get()
        session = self.agent._session(params)
        await self.run_regenerate(reply, session, None)

    async def run_regenerate(
        self, reply: Reply, session: Session, command: list[dict[str, Any]] | None
    ) -> None:
        """A regenerate turn for ``session``, answered like a prompt (``stopReason``)."""
        prompts = session.prompts
        others = [rid for rid in prompts.waiting if rid != reply.id]
        if prompts.active is not None or others:
            prompts.withdraw(reply.id)
            raise _busy(session.id, "regenerated")
        target = target_turn(session.log.records)
        if target is None:
            prompts.withdraw(reply.id)
            raise RpcError(
                -32603,
                "Nothing to regenerate: this session has no message of yours yet.",
                {"kind": "nothing_to_regenerate"},
            )

        def prepare(turn: Turn) -> None:
            now = target_turn(session.log.records) or target
            turn.rec = RegenerateRecorder(session.log, turn.number, now, command)

        await self.agent.run_prompt(reply, session, [], command or [], prepare)

    @staticmethod
    def is_regenerate(blocks: list[dict[str, Any]]) -> bool:
        return is_command(blocks)

    # -- /compact ----------------------------------------------------------------

    @staticmethod
    def compact_instructions(blocks: list[dict[str, Any]]) -> str | None:
        """The instructions of a ``/compact`` prompt ("" for none); None for another prompt."""
        from ..sessions.compact import instructions_of

        return instructions_of(blocks)

    async def run_compact(
        self, reply: Reply, session: Session, command: list[dict[str, Any]], instructions: str
    ) -> None:
        """A ``/compact`` turn for ``session``, queued and answered like a prompt."""
        from ..sessions.compact import CompactRecorder

        def prepare(turn: Turn) -> None:
            turn.rec = CompactRecorder(session.log, turn.number, command)
            turn.command = ("compact", instructions or None)

        await self.agent.run_prompt(reply, session, [], command, prepare)


def ignore_mcp_servers(params: dict[str, Any]) -> None:
    """Validate ``mcpServers`` and say on stderr that they are not used (session/fork)."""
    servers = P.mcp_servers(params)
    if servers:
        log.warning("MCP servers are not connected for a fork; ignoring %d server(s)", len(servers))


def locked_error(session_id: str, exc: SessionLocked) -> RpcError:
    """The answer when another process holds the session's log."""
    return RpcError(
        -32603,
        f"Session {session_id} is open in another acp-bridge process"
        + (f" (pid {exc.holder})" if exc.holder else "")
        + "; close it there first.",
        {"kind": "session_locked", "sessionId": session_id, "pid": exc.holder or None},
    )


def _busy(session_id: str, what: str) -> RpcError:
    return RpcError(
        -32603,
        f"Session {session_id} cannot be {what} while a reply is still streaming or a prompt "
        "is waiting: stop it and wait for its answer first.",
        {"kind": "session_busy", "sessionId": session_id},
    )


def _last_turn(records: list[Record]) -> int:
    turns = [r["turn"] for r in records if r.get("type") == "turn/start"]
    return max(turns, default=0)


def _endings(records: list[Record]) -> list[dict[str, Any]]:
    """How each turn ended, for the load response's ``_meta``."""
    out: list[dict[str, Any]] = []
    for record in records:
        if record.get("type") == "turn/end":
            out.append({"turn": record["turn"], "reason": record.get("reason")})
    return out


def _page_size() -> int:
    raw = os.environ.get(ENV_PAGE_SIZE)
    try:
        size = int(raw) if raw else PAGE_SIZE
    except ValueError:
        size = PAGE_SIZE
    return max(size, 1)


def _write_new_log(path: str, records: list[Record]) -> None:
    data = b"".join(orjson.dumps(record) + b"\n" for record in records)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)

