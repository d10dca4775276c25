"""The ACP methods of stored sessions: load, resume, list, close, delete, fork,
and the ``_acp-bridge/fork_at_turn`` and ``_acp-bridge/regenerate`` extensions.

A session open in this process holds the lock of its log file (see
`acp_bridge.log.writer.files`), so two processes never append to one log.  Opening
a stored session goes through `acp_bridge.log.reopen.reopen` (a torn line cut,
a turn left open by a crash closed as ``crashed``), and ``session/load`` replays
`acp_bridge.log.replay.replay_updates` of the log before it answers.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.to_thread

from ..commands.catalog import announce
from ..errors import LogDamaged, SessionBusy
from ..jsonrpc.connection import current_reply
from ..jsonrpc.errors import RpcError
from ..log.reader import LogCorrupt, session_path
from ..log.reopen import read_to_reopen, reopen
from ..log.replay import title_update, without_deltas
from ..log.replay_read import read_for_replay
from ..log.upcast import load_log, pause_gc
from ..log.writer import encode_record, new_record
from ..log.writer.files import write_new_file
from ..loop.session import Session
from ..stored import client_prompt
from ..stored.fork import ForkError, fork_records
from ..stored.info import PAGE_SIZE, BadCursor, children_of, list_sessions, title_of
from . import params as P
from .edge import Handler
from .prompt_turns import run_regenerate
from .table import SessionTable, require_directory

log = logging.getLogger("acp_bridge.sessions")

FORK_AT_TURN: Final = "_acp-bridge/fork_at_turn"
REGENERATE: Final = "_acp-bridge/regenerate"
ENV_PAGE_SIZE: Final = "ACP_BRIDGE_LIST_PAGE_SIZE"

Record = dict[str, Any]


class StoredMethods:
    def __init__(self, table: SessionTable) -> None:
        self.table = table
        # Sessions a load or resume is opening from their logs, until registered.
        self._opening: dict[str, anyio.Event] = {}

    def handlers(self) -> dict[str, Handler]:
        return {
            "session/load": self.load,
            "session/resume": self.resume,
            "session/list": self.list_sessions,
            "session/close": self.close,
            "session/delete": self.delete,
            "session/fork": self.fork,
            FORK_AT_TURN: self.fork_at_turn,
            REGENERATE: self.regenerate,
        }

    # -- opening -----------------------------------------------------------------

    def _stored_path(self, session_id: str) -> str:
        try:
            path = session_path(self.table.state_dir, session_id)
        except ValueError:
            raise RpcError.invalid_params("sessionId", "is not a valid session id") from None
        if not os.path.isfile(path):
            raise RpcError.invalid_params("sessionId", f"no stored session {session_id!r}")
        return path

    async def _open(self, params: dict[str, Any]) -> Opened:
        """The session of a load or resume, opened from its log if not open here
        (see `Opened`)."""
        table = self.table
        session_id = P.session_id(params)
        cwd = P.absolute_path(params, "cwd")
        # Resent in full by the editor on a load or resume; when it sends
        # none, the session keeps those its session/new had.
        dirs = P.additional_directories(params)
        # The editor's system prompt, if it sends one, replaces the session's.
        client = P.system_prompt(params)
        table.mcp.editor_specs(params)  # checked before the session is opened
        await self._after_opening(session_id)
        session = table.sessions.get(session_id)
        if session is not None:
            if session.prompts.active is not None or session.prompts.waiting:
                raise SessionBusy(session_id, "loaded again")
            await table.outbox.drain()
            # In a worker thread: a long session's file is megabytes.
            if client is not None:
                client_prompt.keep(session, params["systemPrompt"])
                session.context.client_prompt = client
                session.context.reload()
                await table.prepare_context(session)
            items, others = await anyio.to_thread.run_sync(self._read_for_replay, session.log.path)
            return Opened(session, items, others, False)
        path = self._stored_path(session_id)
        table.lock(session_id, path)
        # Until it is registered, a second load or resume of it waits (`_open`).
        opening = self._opening[session_id] = anyio.Event()
        try:
            sent = params["systemPrompt"] if client is not None else None
            return await self._open_stored(session_id, cwd, path, dirs, sent)
        finally:
            del self._opening[session_id]
            opening.set()

    async def _open_stored(
        self,
        session_id: str,
        cwd: str,
        path: str,
        dirs: list[str] | None,
        sent_prompt: dict[str, Any] | None = None,
    ) -> Opened:
        """`_open` of a session not open here, its log locked (unlocked if it cannot be read)."""
        table = self.table
        try:
            # In a worker thread: a long session's file is megabytes.
            read = await anyio.to_thread.run_sync(
                functools.partial(read_to_reopen, path, for_replay=True)
            )
            reopened = reopen(path, table.outbox, read)
        except LogCorrupt as exc:
            table.unlock(session_id)
            raise LogDamaged(exc.path, exc.reason, exc.line_no, loading=True) from None
        except BaseException:
            table.unlock(session_id)
            raise
        if reopened.closed:
            log.warning(
                "session %s: its last turn was left open (the agent stopped); closed it as %s",
                session_id,
                reopened.closed[-1].get("reason"),
            )
        others = without_deltas(reopened.records)
        session = await self._register(session_id, cwd, reopened.log, others, dirs, sent_prompt)
        session.prompts.turns = _last_turn(others)
        items = reopened.items if reopened.items is not None else reopened.records
        return Opened(session, items, others, True)

    async def _after_opening(self, session_id: str) -> None:
        """Wait while a load or resume is opening ``session_id`` from its log (a
        close, a delete or another load then finds it open, or not at all)."""
        while (opening := self._opening.get(session_id)) is not None:
            await opening.wait()

    def _read_for_replay(self, path: str) -> tuple[list[Any], list[Record]]:
        """The items a replay reads (`read_for_replay`) and the records that are not deltas."""
        read = read_for_replay(path)
        if read is None:
            loaded = self._read(path)
            return loaded.records, without_deltas(loaded.records)
        loaded, items = read
        return items, without_deltas(loaded.records)

    def _read(self, path: str) -> Any:
        try:
            return load_log(path)
        except LogCorrupt as exc:
            raise LogDamaged(exc.path, exc.reason, exc.line_no, loading=False) from None

    async def _register(
        self,
        session_id: str,
        cwd: str,
        slog: Any,
        records: list[Record],
        dirs: list[str] | None = None,
        sent_prompt: dict[str, Any] | None = None,
    ) -> Session:
        """The session of a log just opened, in the table (with ``dirs`` as its
        additional directories, else those of its start, and ``sent_prompt`` as
        the editor's system prompt, else the one its log keeps); if that fails,
        the log's lock is given up (the next load may try again)."""
        try:
            return await self._make(session_id, cwd, slog, records, dirs, sent_prompt)
        except BaseException:
            self.table.sessions.pop(session_id, None)
            self.table.unlock(session_id)
            raise

    async def _make(
        self,
        session_id: str,
        cwd: str,
        slog: Any,
        records: list[Record],
        dirs: list[str] | None,
        sent_prompt: dict[str, Any] | None,
    ) -> Session:
        table = self.table
        provider = await table.providers.new()
        # Tools as the log left them: the last mode and the remembered choices.
        start = next((r for r in records if r.get("type") == "session/start"), {})
        stored = start.get("additional_directories")
        extra = dirs
        if extra is None and isinstance(stored, list):
            extra = [d for d in stored if isinstance(d, str)]
        # What the session reads of its log: its tools' state and its cost so far.
        session = table.make_session(session_id, cwd, slog, provider, extra, records)
        from .subagents import attach, depth_of

        attach(table, session, depth_of(records))  # a reopened child: as deep as it was
        if sent_prompt is not None:
            client_prompt.keep(session, sent_prompt)
            session.context.client_prompt = client_prompt.restore([sent_prompt_record(sent_prompt)])
        else:
            session.context.client_prompt = client_prompt.restore(records)
        table.sessions[session_id] = session
        await table.prepare_context(session)
        return session

    def _options(self, session: Session) -> dict[str, Any]:
        """``modes`` and ``configOptions``, as a ``session/new`` answer has them."""
        from . import tool_setup  # the tools load off the start-up path

        return tool_setup.new_session_fields(session, self.table.dialect)

    # -- load and resume ---------------------------------------------------------

    async def load(self, params: dict[str, Any]) -> dict[str, Any]:
        # No cyclic garbage collection from the read until the records are
        # freed: a collection while they live would walk all of them (a long
        # log's records are most of the heap).  They are freed once the
        # answer is written (`_release`): freeing a long log's records takes
        # a while, and the editor waits for the answer, not for that.
        resume = pause_gc()
        held: list[Any] = []
        try:
            opened = await self._open(params)
            session, records, others = opened.session, opened.items, opened.others
            held += [records, others]
            await self.table.mcp.attach(session, params)
            if not opened.now:
                session.context.reload()  # the instruction files are read again
                await self.table.prepare_context(session)
            from ..tools.base import ClientCapabilities

            frames = self.table.dialect.replay_frames(
                records,
                session.frames,
                others=others,
                compaction=session.context.compaction_updates,
                notices=session.context.notices,
                plans=ClientCapabilities.from_initialize(
                    self.table.dialect.opt_ins(self.table.client_capabilities)
                ).plan,
            )
            # Queued in pieces: the writer joins a batch's frames anyway.
            send = self.table.outbox.send
            for frame in frames:
                send(frame)
            from .subagents import exposed, replayed

            if exposed(self.table):  # the children, announced again
                for update in replayed(others, session.id, session.cwd):
                    send(session.frames.update(update))
            endings = _endings(others)
            del records, others, frames
            answer = await self._announce_then_answer(session, endings)
            self.table.spawn(functools.partial(_release, self.table.outbox, held, resume))
        except BaseException:
            # Also when the release task cannot start: the collector runs again.
            held.clear()
            resume()
            raise
        return answer

    def v2_handlers(self) -> dict[str, Handler]:
        """ACP v2's ``session/resume``, which replays (v2 has no ``session/load``)."""
        return {"session/resume": self.resume_replaying}

    async def resume_replaying(self, params: dict[str, Any]) -> dict[str, Any]:
        """``session/resume`` with ``replayFrom`` is a load; without it, a resume."""
        replay_from = params.get("replayFrom")
        if replay_from is None:
            return await self.resume(params)
        if not isinstance(replay_from, dict) or replay_from.get("type") != "start":
            raise RpcError.invalid_params(
                "replayFrom", f'must be {{"type": "start"}}, got {P.echo(replay_from)}'
            )
        return await self.load(params)

    async def resume(self, params: dict[str, Any]) -> dict[str, Any]:
        opened = await self._open(params)
        session, others = opened.session, opened.others
        await self.table.mcp.attach(session, params)
        # No replay: only what the editor needs to use the session again.
        title = title_of(others)
        if title is not None:
            self.table.outbox.send(session.frames.update(title_update(title)))
        return await self._announce_then_answer(session, _endings(others))

    async def _announce_then_answer(
        self, session: Session, endings: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Send the session's commands, then answer a load or resume once its MCP
        servers are up (or the bound has passed), then what the servers have to
        say; ``endings``: how each turn ended (`_endings`).

        The session's state (its title, its commands) goes before the answer
        here, as the replay does: the editor asked for this session id, so it
        takes updates for it now and has them when the session opens.  (A new
        session or a fork sends them after its answer, which is what tells the
        editor the id.)  What the servers say follows the answer: it may be a
        thought, and a resume sends no conversation before answering."""
        await self.table.mcp.ready(session)
        announce(session)
        at_rest = self.table.dialect.opened_state(session.frames)
        if at_rest is not None:
            # v2: the session's state after any replay, before the answer (a MUST).
            self.table.outbox.send(at_rest)
        answer = {**self._options(session), "_meta": {"acpBridge": {"turns": endings}}}
        current_reply.get().result(answer)
        self.table.mcp.answered(session)
        return answer

    # -- list, close, delete -----------------------------------------------------

    async def list_sessions(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.optional(params, "cwd", str)
        cursor = P.optional(params, "cursor", str)
        page_size = _page_size()
        state_dir = self.table.state_dir
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
        await self._after_opening(P.session_id(params))
        await self.table.close(self.table.get(params))
        return {}

    async def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        """``session/delete``: the session's log, and first its subagents'
        (never listed alone, they are parts of it: `children_of`)."""
        session_id = P.session_id(params)
        try:
            path = session_path(self.table.state_dir, session_id)
        except ValueError:
            raise RpcError.invalid_params("sessionId", "is not a valid session id") from None
        await self._close_if_open(session_id)
        state_dir = self.table.state_dir
        exists = await anyio.to_thread.run_sync(os.path.isfile, path)
        # Its children too when it is gone already (an older version deleted
        # it and left them).
        children = await anyio.to_thread.run_sync(children_of, state_dir, session_id)
        if not exists and not children:
            # Deleting a session that never existed, or was deleted already,
            # succeeds silently (session-delete.mdx, Semantics).
            log.debug("session/delete: no stored session %s; nothing to do", session_id)
            return {}
        for child in children:
            await self._close_if_open(child)
        # Every lock before any log goes, the parent's first: a delete refused
        # (the session or one of its children open elsewhere) leaves them all.
        parent = [(session_id, path)] if exists else []
        logs = [(child, session_path(state_dir, child)) for child in children]
        locked: list[str] = []
        try:
            for sid, log_path in [*parent, *logs]:
                self.table.lock(sid, log_path)
                locked.append(sid)
            for _, log_path in [*logs, *parent]:  # the deepest first
                self._remove(log_path)
        finally:
            for sid in locked:
                self.table.unlock(sid)
        return {}

    async def _close_if_open(self, session_id: str) -> None:
        await self._after_opening(session_id)
        session = self.table.sessions.get(session_id)
        if session is not None:
            await self.table.close(session)

    def _remove(self, path: str) -> None:
        """Delete a session's log (the caller holds its lock)."""
        with contextlib.suppress(FileNotFoundError):  # deleted meanwhile: the same
            os.unlink(path)
        # The lock file that earlier versions kept beside the log.
        with contextlib.suppress(OSError):
            os.unlink(path.removesuffix(".jsonl") + ".lock")

    # -- fork --------------------------------------------------------------------

    async def fork(self, params: dict[str, Any]) -> dict[str, Any]:
        cwd = P.absolute_path(params, "cwd")
        await require_directory(cwd, "cwd")
        self.table.mcp.editor_specs(params)  # checked before the fork is written
        dirs = P.additional_directories(params)
        P.system_prompt(params)  # checked before the fork is written
        return await self._fork(P.session_id(params), cwd, None, dirs, params)

    async def fork_at_turn(self, params: dict[str, Any]) -> dict[str, Any]:
        turn = P.require(params, "turn", int)
        if turn < 1:
            raise RpcError.invalid_params("turn", "must be a turn number (1 or more)")
        cwd = None if params.get("cwd") is None else P.absolute_path(params, "cwd")
        if cwd is not None:
            await require_directory(cwd, "cwd")
        P.system_prompt(params)  # checked before the fork is written
        return await self._fork(P.session_id(params), cwd, turn, None, params)

    async def _fork(
        self,
        source_id: str,
        cwd: str | None,
        turn: int | None,
        dirs: list[str] | None,
        params: dict[str, Any],
    ) -> dict[str, Any]:
        table = self.table
        source_path = self._stored_path(source_id)
        if source_id in table.sessions:
            await table.outbox.drain()
        loaded = await anyio.to_thread.run_sync(self._read, source_path)
        start: Record = next((r for r in loaded.records if r.get("type") == "session/start"), {})
        cwd = cwd if cwd is not None else start.get("cwd")
        if not isinstance(cwd, str):
            raise RpcError.invalid_params("cwd", "is required (the source session has none)")
        session_id = "sess_" + uuid.uuid4().hex
        fork = functools.partial(
            fork_records,
            loaded.records,
            session_id=session_id,
            cwd=cwd,
            upto_turn=turn,
            at=time.time(),
            additional_directories=dirs,
        )
        try:
            # A pass over every record of the source: in the worker thread too.
            records = await anyio.to_thread.run_sync(fork)
        except ForkError as exc:
            raise RpcError.invalid_params("turn", str(exc)) from None
        _carry_client_prompt(records, loaded.records, params.get("systemPrompt"))
        path = session_path(table.state_dir, session_id)
        # Written first, then locked (the lock is the log's own): nobody else
        # knows the new id yet.
        await anyio.to_thread.run_sync(_write_new_log, path, records)
        table.lock(session_id, path)
        try:
            read = await anyio.to_thread.run_sync(read_to_reopen, path)
            reopened = reopen(path, table.outbox, read)
        except BaseException:
            table.unlock(session_id)
            raise
        session = await self._register(session_id, cwd, reopened.log, records)
        session.prompts.turns = _last_turn(records)
        # Its MCP servers, like a new session's: the editor's (mcpServers) and the configured.
        await table.mcp.attach(session, params)
        await table.mcp.ready(session)
        parent = records[0]["parent"]
        answer = {
            "sessionId": session_id,
            **self._options(session),
            "_meta": {"acpBridge": {"parent": {"sessionId": source_id, "turn": parent["turn"]}}},
        }
        current_reply.get().result(answer)
        table.mcp.answered(session)
        # Its state after the answer, as a new session's (the answer tells the
        # editor the id): its title, which its turns gave it, then its commands.
        title = title_of(records)
        if title is not None:
            table.outbox.send(session.frames.update(title_update(title)))
        announce(session)
        return answer

    # -- regenerate --------------------------------------------------------------

    async def regenerate(self, params: dict[str, Any]) -> None:
        reply = current_reply.get()
        await run_regenerate(self.table, reply, self.table.get(params), None)


async def _release(outbox: Any, held: list[Any], resume: Callable[[], None]) -> None:
    """Free what a load held (``held``) once its answer is written, or after
    `RELEASE_AFTER` seconds if the editor does not read it; then let the
    garbage collector run again (``resume``)."""
    try:
        with anyio.move_on_after(RELEASE_AFTER):
            await outbox.drain()
    finally:
        held.clear()
        resume()


RELEASE_AFTER: Final = 5.0


@dataclass(frozen=True, slots=True)
class Opened:
    """A session a load or resume opened (`StoredMethods._open`)."""

    session: Session
    # Its records as the replay reads them (runs of text deltas folded,
    # `acp_bridge.log.replay_read`).
    items: list[Any]
    # Those that are not ``stream/delta`` (only the replay reads the deltas,
    # most records of a long log).
    others: list[Record]
    # Whether it was opened now (else it was open here already).
    now: bool


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
    write_new_file(path, b"".join(map(encode_record, records)))


def sent_prompt_record(sent: dict[str, Any]) -> dict[str, Any]:
    """A ``session/system_prompt`` record's fields for a ``systemPrompt`` as sent."""
    return {"type": client_prompt.CLIENT_PROMPT_TYPE, **client_prompt.record_fields(sent)}


def _carry_client_prompt(
    records: list[Record], source: list[Record], sent: dict[str, Any] | None
) -> None:
    """The fork's editor's system prompt: the one its ``session/fork`` sent, else
    the one in force in the source at its end (it may have been given after
    the turns the fork copies); added to the fork's records when its copy does
    not end with it already."""
    wanted = (
        sent_prompt_record(sent)
        if sent is not None
        else next(
            (r for r in reversed(source) if r.get("type") == client_prompt.CLIENT_PROMPT_TYPE),
            None,
        )
    )
    if wanted is None or client_prompt.restore([wanted]) == client_prompt.restore(records):
        return
    fields = client_prompt.record_fields(wanted)
    records.append(new_record(len(records), client_prompt.CLIENT_PROMPT_TYPE, 0, 0, fields))
