"""Subagent sessions: the child session a ``task`` call hands its task to.

A child is a session of its own (`acp_bridge.loop.session.Session`, made by
the table like any other): its own model context, its own tools, its own log
beside the parent's.  The two logs are linked both ways: the child's
``session/start`` names its owner (the parent session and the tool call),
and the parent's tool call records an update whose ``rawOutput`` names the
child (``subagentSessionId``).  The child runs one turn on the task's
prompt, through its own prompt queue (the entry point every prompt takes),
in a task of its own; its final answer is the tool call's result.

What the editor sees depends on ``clientCapabilities.subagents``, as the
connection's dialect reads it (`acp_bridge.protocol.dialect.Dialect.opt_ins`:
ACP v2 requires no capability for it, so every v2 client has it):

* without it, nothing of the child reaches the editor under the child's id
  (an editor that does not know a session would drop its updates or refuse
  its requests): the parent's tool call shows progress (a
  ``tool_call_update`` saying the subagent works on it), then the answer as
  the call's result; the child's editor requests name the parent session,
  and its permission requests say they come from the subagent (the title
  starts "Subagent (its description):");
* with it, a ``subagent_update`` on the parent announces the child before any
  of its traffic, the task is handed over as a ``session_message`` on the
  child, the child's updates go out under its own ``sessionId``, and its
  answer comes back as a ``session_message`` on the parent.  The client may
  cancel the child alone (``capabilities.cancel``: ``session/cancel`` with
  the child's id): the child stops as at a Stop, the parent goes on, and its
  ``task`` call's result is what the child had said.  Over v2 the child's
  turn shows its ``state_update`` (``running``, ``idle``) under its own id,
  and its tool calls and terminals may be cancelled one by one
  (``tool_call/cancel``, ``terminal/cancel`` with the child's id).

The rights of a child never exceed its parent's: it starts in the parent's
mode, with the parent's remembered rules and directories, and it starts
children of its own only as deep as ``--subagent-depth`` allows (default 1:
a child has no ``task``).  At most ``--subagents-at-once`` children run at
once in the process (default 4); a ``task`` call waits for a free place.

The Stop reaches every child: a Stop of the parent cancels the ``task``
call (`acp_bridge.loop.inflight`), which stops the child first, as the user
(its delivered prefix kept as its interrupted message), waits for the
child's ending, bounded by a share of the cancel deadline, and only then lets
the parent's ending go on; the call's result is what the child had said.  So
every update of the child and of the parent precedes the parent's
``cancelled`` answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Final

import anyio
import anyio.to_thread

from ..jsonrpc.connection import Reply
from ..loop.session import Session
from ..loop.turn import Turn, TurnConfig, TurnKind
from ..protocol import answers
from ..stored import client_prompt
from ..tools.base import ToolContext, ToolOutput
from ..tools.paths import truncate
from ..tools.registry import ToolRegistry
from ..tools.subagent import NAME as TASK
from ..update_builders import session_message, subagent_update
from .prompt_turns import send_started
from .table import SessionTable

__all__ = ["attach", "exposed"]

# The share of the cancel deadline a child has to stop in, so that the
# parent's own ending still fits in the rest.
CHILD_DEADLINE_SHARE: Final = 0.6


def exposed(table: SessionTable) -> bool:
    """Whether the client sees child sessions: ``clientCapabilities.subagents``,
    as its dialect reads it (v2: always)."""
    opted = table.dialect.opt_ins(table.client_capabilities)
    return isinstance((opted or {}).get("subagents"), dict)


def depth_of(records: Iterable[dict[str, Any]]) -> int:
    """How deep a session is, from its log's ``session/start.owner``: 0 for a
    session of the editor; a child's depth as logged (1 if not logged)."""
    for record in records:
        if record.get("type") == "session/start":
            owner = record.get("owner")
            if not isinstance(owner, dict):
                return 0
            depth = owner.get("depth")
            return depth if isinstance(depth, int) and depth > 0 else 1
    return 0


def attach(table: SessionTable, session: Session, depth: int = 0) -> None:
    """Let ``session`` (at ``depth``: 0 for a session of the editor) start
    children with ``task`` if ``--subagent-depth`` allows; else it has no ``task``."""
    tools = session.tools
    if tools is None:
        return
    if depth < table.config.subagent_depth:
        tools.subagents = ChildSessions(table, session, depth)
    elif tools.registry.get(TASK) is not None:
        tools.subagents = None
        tools.registry = ToolRegistry([tool for tool in tools.registry if tool.name != TASK])


class ChildSessions:
    """The children of one parent session (`acp_bridge.tools.subagent.SubagentHost`)."""

    __slots__ = ("depth", "parent", "table")

    def __init__(self, table: SessionTable, parent: Session, depth: int) -> None:
        self.table, self.parent, self.depth = table, parent, depth

    async def run(self, ctx: ToolContext, description: str, prompt: str) -> ToolOutput:
        places = self.table.subagent_places
        if places.value == 0:
            ctx.update({"content": [_shown(f"Waiting for a free place: {description}")]})
        async with places:  # a Stop while waiting: nothing started
            return await self._run(ctx, description, prompt)

    async def _run(self, ctx: ToolContext, description: str, prompt: str) -> ToolOutput:
        table, parent = self.table, self.parent
        shown = exposed(table)
        child = await _open_child(table, parent, ctx.call_id, description, shown, self.depth + 1)
        blocks = [{"type": "text", "text": prompt}]
        ctx.update(
            {
                "status": "in_progress",
                "content": [_shown(f"A subagent works on it: {description}")],
                "rawOutput": {"subagentSessionId": child.id},
            }
        )
        if shown:
            parent.outbox.send(
                parent.frames.update(subagent_update(child.id, description, child.cwd))
            )
            handed = session_message("handover_" + ctx.call_id, parent.id, child.id, blocks)
            child.outbox.send(child.frames.update(handed))
        if shown:
            table.children[child.id] = child  # the client may cancel it alone
        host = _ChildHost(table, child, blocks)
        done = anyio.Event()
        ran: list[Turn | None] = []

        async def run_child() -> None:
            try:
                ran.append(await child.prompts.run("subagent:" + ctx.call_id, host))
            finally:
                done.set()

        table.spawn(run_child)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            # The parent is being stopped: the child first, for the same cause
            # (the user's Stop, or the editor gone: a disconnect is no Stop).
            cause = "disconnected" if table.closing else "user"
            child.prompts.cancel(table.spawn, cause)
            with anyio.CancelScope(shield=True), anyio.move_on_after(host.config.cancel_deadline):
                await done.wait()
            ctx.partial = _result(child, None, stopped=True, limit=ctx.max_output)
            _answered(parent, child, ctx.call_id, ctx.partial, shown)
            _close(table, child)
            raise
        output = _result(child, ran[0] if ran else None, stopped=False, limit=ctx.max_output)
        _answered(parent, child, ctx.call_id, output, shown)
        _close(table, child)
        return output


class _ChildHost:
    """What a child's prompt queue needs for its one turn (`acp_bridge.loop.prompts.PromptHost`).

    The turn answers no request of the editor: its start and its end are put
    on the wire as the dialect puts a prompt's (v2: the child's ``running``
    and ``idle`` state updates; v1: nothing), with a reply already spent; a
    hidden child's frames are not sent at all (`_Hidden`).
    """

    def __init__(self, table: SessionTable, child: Session, blocks: list[dict[str, Any]]) -> None:
        self._table = table
        self._child = child
        self._reply = Reply(table.outbox, "subagent")
        self._reply.sent = True  # nothing answers a child's prompt
        self._blocks = blocks
        self.spawn = table.spawn
        self.running = table.running
        deadline = table.config.cancel_deadline * CHILD_DEADLINE_SHARE
        self.config: TurnConfig = dataclasses.replace(table.config, cancel_deadline=deadline)

    def before_start(self) -> TurnKind | None:
        if self._table.closing:
            return None
        return TurnKind.prompt(self._blocks, self._blocks)

    def started(self, turn: Turn) -> None:
        send_started(self._table, self._reply, self._child)

    def answer(self, turn: Turn) -> None:
        """The child's end on the wire; its answer is the parent's tool result."""
        child = self._child
        frame = self._table.dialect.answer_turn(
            self._reply, turn.stop_reason, frames=child.frames, error=turn.error
        )
        if frame:
            child.outbox.send(frame)


class _Hidden:
    """The ordered writer as a child the editor was not told about uses it:
    its frames are not sent (its log records are written as usual)."""

    def __init__(self, outbox: Any) -> None:
        self._outbox = outbox

    def __getattr__(self, name: str) -> Any:
        return getattr(self._outbox, name)

    def send(self, frame: bytes) -> None:
        # Not sent, but recorded: the writer takes the stream's delta record
        # as it would with the frame.
        self._outbox.nudge()

    def retract(self, prefixes: tuple[bytes, ...], count: int) -> bool:
        return False  # nothing was queued


async def _open_child(
    table: SessionTable,
    parent: Session,
    call_id: str,
    description: str,
    shown: bool,
    depth: int,
) -> Session:
    """A new child session of ``parent``, its log created beside the parent's."""
    child_id, slog = await table.new_log()
    tools = parent.tools
    extra = list(tools.roots[1:]) if tools is not None else []
    child = table.make_session(child_id, parent.cwd, slog, parent.provider, extra or None)
    if not shown:
        child.outbox = _Hidden(table.outbox)
    # The editor's system prompt binds its subagents too (append or override).
    child.context.client_prompt = parent.context.client_prompt
    await table.prepare_context(child)
    mine = child.tools
    if mine is not None:
        # No more rights than the parent: its mode, its rules, its
        # directories; children of its own only as deep as allowed.
        attach(table, child, depth)
        if tools is not None:
            mine.mode = tools.mode
            mine.rules = dict(tools.rules)
        if not shown:
            mine.session_id = parent.id  # the editor knows only the parent
            mine.asker = f"Subagent ({description})"
            mine.call_prefix = f"{child_id}/"
    start = answers.session_start_fields(
        child_id,
        parent.cwd,
        parent.provider.name,
        extra or None,
        table.client_info,
        table.client_capabilities,
    )
    owner = {"session_id": parent.id, "tool_call": call_id, "depth": depth}
    slog.append("session/start", 0, 0, **start, owner=owner)
    given = parent.context.client_prompt
    if given is not None:
        # Logged as the editor's own, so that a load of the child by its id keeps it.
        sent = {"mode": given.mode, "content": [{"type": "text", "text": given.text}]}
        client_prompt.keep(child, sent)
    if tools is not None:
        # Logged, so that a load of the child by its id has exactly these rights.
        slog.append("session/mode", 0, 0, mode=tools.mode, via="parent")
        for tool, decision in tools.rules.items():
            slog.append("permission/rule", 0, 0, tool=tool, decision=decision, cwd=parent.cwd)
    slog.sync()
    return child


def _answer_text(child: Session) -> str:
    """The text of the child's last assistant message (interrupted or not)."""
    for message in reversed(child.history()):
        if message["role"] == "assistant":
            texts = [b.get("text", "") for b in message["content"] if b.get("type") == "text"]
            return "".join(texts)
    return ""


def _result(child: Session, turn: Turn | None, *, stopped: bool, limit: int) -> ToolOutput:
    """The ``task`` call's result: the child's answer, or what it had said when
    stopped, cut to ``limit`` characters as other tools' outputs are (saying
    where the whole answer is: the child's session)."""
    text = _answer_text(child)
    if len(text) > limit:
        text = truncate(text, limit) + f" (the whole answer: session {child.id})"
    raw = {"subagentSessionId": child.id}
    if stopped or (turn is not None and turn.stop_reason == "cancelled"):
        said = f" What it had said:\n{text}" if text.strip() else " It had said nothing yet."
        return ToolOutput("The subagent was stopped." + said, is_error=True, raw_output=raw)
    if turn is None or turn.error is not None:
        why = "" if turn is None or turn.error is None else f": {turn.error}"
        return ToolOutput(f"The subagent failed{why}.", is_error=True, raw_output=raw)
    return ToolOutput(text or "The subagent gave no answer.", raw_output=raw)


def _answered(
    parent: Session, child: Session, call_id: str, output: ToolOutput, shown: bool
) -> None:
    """A client that sees children gets the child's answer as a message to the parent."""
    if shown:
        blocks = [{"type": "text", "text": output.text}]
        update = session_message("answer_" + call_id, child.id, parent.id, blocks)
        parent.outbox.send(parent.frames.update(update))


def _close(table: SessionTable, child: Session) -> None:
    """The child's records written, its log closed and unlocked.

    The records are written at once, ahead of the queue, as for the answer to
    a parent's Stop (`acp_bridge.acp.prompt_turns`): nothing here waits for
    the editor to read the child's frames, which stay queued ahead of the
    parent's answer (a slow editor must not hold a Stop past its deadline).
    The fsync follows the frames; a closed log is synced at its path.
    """
    table.children.pop(child.id, None)
    table.outbox.write_log_now(child.log.file)
    child.log.sync()
    child.log.file.close()
    table.unlock(child.id)


def _shown(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def replayed(records: list[Any], parent_id: str, cwd: str) -> list[dict[str, Any]]:
    """What a load of a parent replays, for a client told of children: each
    child's announcement, then its answer as a message to the parent (a pure
    function of the parent's log: its ``task`` calls' updates and results)."""
    children: dict[str, str] = {}  # tool call -> child session
    titles: dict[str, str] = {}
    updates: list[dict[str, Any]] = []
    for record in records:
        kind = record.get("type")
        if kind == "tool/update":
            update = record.get("update") or {}
            call = str(record.get("tool_call_id"))
            given = update.get("rawInput")
            if isinstance(given, dict) and isinstance(given.get("description"), str):
                titles[call] = given["description"]
            raw = update.get("rawOutput")
            named = isinstance(raw, dict) and isinstance(raw.get("subagentSessionId"), str)
            if named and call not in children:
                assert isinstance(raw, dict)
                child = children[call] = raw["subagentSessionId"]
                updates.append(subagent_update(child, titles.get(call, "Subagent"), cwd))
        elif kind == "tool/result" and str(record.get("tool_call_id")) in children:
            call = str(record.get("tool_call_id"))
            text = "".join(
                b.get("text", "") for b in record.get("content") or () if b.get("type") == "text"
            )
            blocks = [{"type": "text", "text": text}]
            updates.append(session_message("answer_" + call, children[call], parent_id, blocks))
    return updates
