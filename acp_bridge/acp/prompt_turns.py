"""Running a prompt's turn for a session of the table, and answering it.

Used by the live ``session/prompt`` (a plain prompt, ``/regenerate``,
``/compact``, a slash command) and by the stored ``_acp-bridge/regenerate``:
a turn is queued on its session (`acp_bridge.loop.prompts.PromptQueue`),
built whole when its time comes (its `TurnKind` says what it is), run, and
answered the moment it ends.  The bookkeeping of a session's prompts lives in
its queue; this module is what the protocol adds: the log check before a turn
starts, the first turn's announcements, and the answer.
"""

from __future__ import annotations

from collections.abc import Callable
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
from ..log.replay import title_from_prompt, title_update
from ..log.writer.files import LogFileLost
from ..log.writer.lock import SessionLocked
from ..loop.session import Session
from ..loop.turn import Turn, TurnKind
from ..stored.regenerate import target_turn
from .table import SessionTable

__all__ = ["run_regenerate", "run_turn"]


async def run_turn(
    table: SessionTable,
    reply: Reply,
    session: Session,
    blocks: list[dict[str, Any]],
    kind: Callable[[], TurnKind],
) -> None:
    """Queue a turn for ``session`` (a prompt, a ``/compact``, a slash command), run
    it, and answer ``reply`` when it ends.

    ``kind`` makes the turn's `TurnKind` when its time comes (under the
    session's prompt lock, just before it is built: a regenerate's target is
    the latest user turn then); ``blocks`` are the user's message (none for a
    command): the session's title, and what the MCP servers add to it.
    """

    def before_start() -> TurnKind | None:
        if table.closing:
            # The editor is gone or we were told to stop: start nothing.
            return None
        _check_log_writable(table, session)
        if not _before_turn(table, session, blocks):
            return None
        table.mcp.before_turn(session, blocks)
        return kind()

    try:
        host = _PromptHost(table, reply, session, before_start)
        turn = await session.prompts.run(reply.id, host)
    except (RpcError, BridgeError):
        raise  # refused before it started: the error is the answer
    except BaseException:
        table.dialect.answer_unstarted(reply)  # torn down (shutdown)
        raise
    # The turn answered when it ended; this covers a prompt that started
    # no turn (shutdown) or one that never ended.  A second answer is dropped.
    table.dialect.answer_unstarted(reply)
    if turn is not None:
        # What the turn logged is queued: this fsync covers all of it.
        session.log.sync()


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

    def kind() -> TurnKind:
        return TurnKind.regenerate(target_turn(session.log.records) or target, command)

    await run_turn(table, reply, session, [], kind)


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
    log_error = None
    if turn.error is None:
        # Write the turn's records now, so a failure shows in this answer.
        table.outbox.write_log_now(session.log.file)
        log_error = session.log.file.error
        if log_error is not None:
            from ..notices import notify

            why = f"{log_error} ({session.log.path})"
            notify(session, "error", "The session log cannot be written", why, fallback=False)
    # The turn's end on the wire, in the connection's dialect.
    frame = table.dialect.answer_turn(
        reply, turn.stop_reason, frames=session.frames, error=turn.error, log_error=log_error
    )
    if frame:
        table.outbox.send(frame)
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


def send_started(table: SessionTable, reply: Reply, session: Session) -> None:
    """Put a turn's start on the wire as the dialect does (v2: the prompt's
    answer and ``running``), once its start is logged: the user message is
    then the log's last record, whose seq is its ``messageId``'s."""
    frame = table.dialect.turn_started(reply, session.frames, session.log.seq - 1)
    if frame:
        session.outbox.send(frame)


class _PromptHost:
    """What the queue needs for one prompt's turn (`acp_bridge.loop.prompts.PromptHost`)."""

    def __init__(
        self,
        table: SessionTable,
        reply: Reply,
        session: Session,
        before_start: Callable[[], TurnKind | None],
    ) -> None:
        self.config, self.spawn, self.running = table.config, table.spawn, table.running
        self._table, self._reply, self._session = table, reply, session
        self.before_start = before_start

    def started(self, turn: Turn) -> None:
        """The turn's start (and its user message) is logged."""
        send_started(self._table, self._reply, self._session)

    def answer(self, turn: Turn) -> None:
        _answer(self._table, self._reply, self._session, turn)
