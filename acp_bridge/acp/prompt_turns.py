"""Running a prompt's turn for a session of the table, and answering it.

Used by the live ``session/prompt`` (a plain prompt, ``/regenerate``,
``/compact``) and by the stored ``_acp-bridge/regenerate``: a turn is queued
on its session (`acp_bridge.loop.prompts.PromptQueue`), run, and answered the
moment it ends.  The bookkeeping of a session's prompts lives in its queue;
this module is what the protocol adds: the log check before a turn starts,
the first turn's announcements, and the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from ..errors import (
    BridgeError,
    LogNotWritable,
    NothingToRegenerate,
    SessionBusy,
    SessionLockedElsewhere,
)
from ..jsonrpc.connection import Reply
from ..jsonrpc.errors import RpcError
from ..log.lock import SessionLocked
from ..log.logfile import LogFileLost
from ..log.replay import title_from_prompt, title_update
from ..loop.session import Session
from ..loop.turn import Turn
from ..sessions.regenerate import RegenerateRecorder, target_turn
from .edge import to_rpc_error
from .table import SessionTable

__all__ = ["run_command", "run_compact", "run_prompt", "run_regenerate"]


async def run_prompt(
    table: SessionTable,
    reply: Reply,
    session: Session,
    blocks: list[dict[str, Any]],
    raw: list[dict[str, Any]],
    prepare: Callable[[Turn], None] | None = None,
) -> None:
    """Queue a turn for ``session``, run it, and answer ``reply`` when it ends
    (``prepare`` adjusts the turn before it starts: a regenerate's recorder)."""

    def before_start() -> bool:
        if table.closing:
            # The editor is gone or we were told to stop: start nothing.
            return False
        _check_log_writable(table, session)
        if not _before_turn(table, session, blocks):
            return False
        table.mcp.before_turn(session, blocks)
        return True

    try:
        host = _PromptHost(table, reply, session, before_start, prepare)
        turn = await session.prompts.run(reply.id, blocks, raw, host)
    except (RpcError, BridgeError):
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


async def run_command(
    table: SessionTable,
    reply: Reply,
    session: Session,
    raw: list[dict[str, Any]],
    name: str,
    argument: str,
) -> None:
    """A slash command's turn (`acp_bridge.acp.command_turns`), answered like a prompt."""
    from .command_turns import CommandRecorder, answer

    def prepare(turn: Turn) -> None:
        turn.rec = CommandRecorder(session.log, turn.number, name, raw)
        turn.command = (name, argument)
        turn.answer_command = answer

    await run_prompt(table, reply, session, [], raw, prepare)


async def run_regenerate(
    table: SessionTable, reply: Reply, session: Session, command: list[dict[str, Any]] | None
) -> None:
    """A regenerate turn for ``session``, answered like a prompt (``stopReason``)."""
    prompts = session.prompts
    others = [rid for rid in prompts.waiting if rid != reply.id]
    if prompts.active is not None or others:
        prompts.withdraw(reply.id)
        raise SessionBusy(session.id, "regenerated")
    target = target_turn(session.log.records)
    if target is None:
        prompts.withdraw(reply.id)
        raise NothingToRegenerate(session.id)

    def prepare(turn: Turn) -> None:
        now = target_turn(session.log.records) or target
        turn.rec = RegenerateRecorder(session.log, turn.number, now, command)

    await run_prompt(table, reply, session, [], command or [], prepare)


async def run_compact(
    table: SessionTable,
    reply: Reply,
    session: Session,
    command: list[dict[str, Any]],
    instructions: str,
) -> None:
    """A ``/compact`` turn for ``session``, queued and answered like a prompt."""
    from ..sessions.compact import CompactRecorder  # loaded off the start-up path

    def prepare(turn: Turn) -> None:
        turn.rec = CompactRecorder(session.log, turn.number, command)
        turn.command = ("compact", instructions or None)

    await run_prompt(table, reply, session, [], command, prepare)


def _before_turn(table: SessionTable, session: Session, blocks: list[dict[str, Any]]) -> bool:
    """Called just before a turn of ``session`` starts; False: start nothing.

    The session's first prompt gives it its title (its commands were
    announced when it opened).
    """
    if table.sessions.get(session.id) is not session:
        return False  # closed meanwhile
    if session.prompts.turns == 0 and blocks:
        title = title_from_prompt(blocks)
        if title is not None:
            table.outbox.send(session.frames.update(title_update(title)))
    return True


def _answer(table: SessionTable, reply: Reply, session: Session, turn: Turn) -> None:
    if turn.error is not None:
        reply.error(to_rpc_error(turn.error))
    else:
        result: dict[str, Any] = {"stopReason": turn.stop_reason}
        # Write the turn's records now, so a failure shows in this answer.
        table.outbox.write_log_now(session.log.file)
        if session.log.file.error is not None:
            from ..notices import notify

            result["_meta"] = {"acpBridge": {"logError": session.log.file.error}}
            why = f"{session.log.file.error} ({session.log.path})"
            notify(session, "error", "The session log cannot be written", why, fallback=False)
        reply.result(result)
    table.outbox.flush_now()  # someone is waiting for this answer


def _check_log_writable(table: SessionTable, session: Session) -> None:
    """Refuse a new turn while its records could not reach the log.

    The log is the session's only source of truth.  Before anything of the
    turn is sent, the file is checked (`LogTarget.verify`: still there,
    the same file, unchanged since this process wrote it, its lock ours)
    and the records that could not be written earlier are retried; while
    that fails, the editor gets an error that says why, and nothing starts.
    """
    file = session.log.file
    try:
        table.outbox.check_log(file)
    except SessionLocked as exc:
        raise SessionLockedElsewhere(session.id, exc.holder) from None
    except LogFileLost as exc:
        raise LogNotWritable(file.path, f"{exc.strerror}", len(file.pending), lost=True) from None
    except OSError as exc:
        reason = f"{exc.strerror or exc}"
        raise LogNotWritable(file.path, reason, len(file.pending), lost=False) from exc


def _run_turn(table: SessionTable, turn: Turn) -> Callable[[], Coroutine[Any, Any, None]]:
    async def run() -> None:
        table.running.add(turn)
        try:
            await turn.run()
        finally:
            table.running.discard(turn)

    return run


class _PromptHost:
    """What the queue needs for one prompt's turn (`acp_bridge.loop.prompts.PromptHost`)."""

    def __init__(
        self,
        table: SessionTable,
        reply: Reply,
        session: Session,
        before_start: Callable[[], bool],
        prepare: Callable[[Turn], None] | None,
    ) -> None:
        self.config, self.spawn = table.config, table.spawn
        self._table, self._reply, self._session = table, reply, session
        self.before_start = before_start
        self._prepare = prepare

    def prepare(self, turn: Turn) -> None:
        if self._prepare is not None:
            self._prepare(turn)  # e.g. a regenerate turn's own recorder

    def run_turn(self, turn: Turn) -> Callable[[], Coroutine[Any, Any, None]]:
        return _run_turn(self._table, turn)

    def answer(self, turn: Turn) -> None:
        _answer(self._table, self._reply, self._session, turn)
