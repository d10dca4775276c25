"""Running one model response's tool calls, and what a Stop leaves of them.

Calls run one at a time in the order the model gave them (no two tools ever
touch the editor at once, so their effects and the permission prompts come in
the order the model asked for).  For each call:

1. unknown tool: ``tool/call`` ``unavailable`` and an error result;
   arguments that do not fit the tool's model: ``refused`` with the
   validation errors;
2. the ``tool_call_update`` with kind, title, locations and ``rawInput``;
3. the paths the call touches are resolved, symlinks included (in a worker
   thread): one in ``/proc``, ``/sys`` or ``/dev`` refuses the call; then the
   permission decision (`acp_bridge.tools.permissions`), which may ask the
   user (``session/request_permission``, saying where an outside path really
   leads); a refusal or a rejection is a ``refused`` call whose result says
   the user declined.  What the user allowed is the resolved path, given to
   the tool as ``ctx.allowed``;
4. ``tool/call`` ``dispatched``, ``in_progress``, the run (bounded by the
   per-tool timeout), then ``tool/result`` and the final update
   (``completed``, or ``failed`` for an error result).

The results of a step are consecutive ``tool/result`` records: the next model
request gets them as one user message.

On a Stop, the running call is cancelled.  A permission request still pending
is cancelled (``$/cancel_request``) and the call is ``aborted`` and marked
failed; a running tool produces its real partial result when it has one (a
command's output so far) or a result saying it was stopped; the calls not yet
dispatched get an ``ABORTED_BEFORE_DISPATCH`` result from `abort_rest`, which
the turn's ending calls.  Nothing is started once the turn is stopped.

One running call can be cancelled alone (`ToolRunner.cancel_call`, ACP v2's
``tool_call/cancel``): it is stopped as a Stop would stop it (a command is
killed, its output so far is its result), its result says the user cancelled
it, its final update is marked cancelled (`CANCELLED_META`; v1 shows it
``failed``), and the turn goes on: the model gets that result in its next
request.  A local command's terminal can be cancelled alone too
(`ToolRunner.cancel_terminal`, ``terminal/cancel``): its command is killed and
the call ends with what it printed, saying so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.to_thread
from pydantic import ValidationError

from ..jsonrpc.connection import ConnectionClosed
from ..jsonrpc.errors import RemoteError
from ..log.records import ToolCallStatus
from ..update_builders import CANCELLED_META, tool_call_update
from . import localfs
from . import permissions as perm
from .base import ToolContext, ToolError, ToolOutput
from .live_terminal import LiveTerminal
from .state import ToolState
from .texts import unavailable_tool_text
from .turn_port import TurnPort

log = logging.getLogger("acp_bridge.tools")

ABORTED_BEFORE_DISPATCH: Final = "ABORTED_BEFORE_DISPATCH"
# _ask's answer when the turn was stopped while asking.
STOPPED: Final = "<stopped>"


def aborted_text(name: str) -> str:
    return (
        f"{ABORTED_BEFORE_DISPATCH}: the user stopped the turn before this {name} call "
        "was dispatched. It did not run."
    )


def stopped_text(name: str) -> str:
    return f"The user stopped the turn while this {name} call was running; it returned no result."


def cancelled_text(name: str) -> str:
    return (
        f"The user cancelled this {name} call while it was running; it returned no result. "
        "The turn went on."
    )


@dataclass
class _Running:
    """The call running now: what cancelling it alone needs."""

    call_id: str
    scope: anyio.CancelScope
    ctx: ToolContext


def permission_stopped_text(name: str) -> str:
    return (
        f"The user stopped the turn while permission for this {name} call was being asked. "
        "It did not run."
    )


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _shown(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def _spelled(path: str, real: str) -> str:
    """An outside path as the user is asked about it: where it really leads."""
    return path if path == real else f"{path} (which leads to {real})"


class ToolRunner:
    def __init__(self, turn: TurnPort, state: ToolState) -> None:
        self.turn = turn
        self.state = state
        # Calls of the step not yet dispatched, in model order.
        self.queue: list[dict[str, Any]] = []
        self.running: _Running | None = None
        # Ids of the calls (and of their terminals) that have finished, for
        # the answer to a late cancel.
        self.finished: set[str] = set()

    async def run(self, calls: list[dict[str, Any]]) -> None:
        self.queue = list(calls)
        while self.queue:
            if self.turn.over:
                return  # stopped: the ending gives the rest ABORTED_BEFORE_DISPATCH
            await self._one(self.queue[0])

    def cancel_call(self, call_id: str) -> str | None:
        """Cancel the running call ``call_id`` alone; the turn goes on.  None
        when accepted (its final update follows), else why it cannot be."""
        running = self.running
        if running is not None and running.call_id == call_id and not self.turn.over:
            running.ctx.cancelled = True
            running.scope.cancel()
            return None
        return self._not_running("tool call", call_id)

    async def cancel_terminal(self, terminal_id: str) -> str | None:
        """Kill the command of the running call's terminal ``terminal_id``; the
        call ends with what it printed, and the turn goes on.  None when
        accepted (its ``terminal_update`` with the exit status follows)."""
        running = self.running
        live = running.ctx.live if running is not None else None
        ours = live is not None and live.terminal_id == terminal_id and not self.turn.over
        if ours and live is not None and await live.cancel():
            return None
        return self._not_running("terminal", terminal_id)

    def _not_running(self, what: str, id: str) -> str:
        if id in self.finished:
            return f"the {what} {id} has already finished"
        if any(call["id"] == id for call in self.queue):
            return f"the {what} {id} is not running yet (only a running one can be cancelled)"
        return f"no {what} {id} is running in this session"

    def abort_rest(self) -> None:
        """Every call not yet dispatched gets its aborted result and final status."""
        queue, self.queue = self.queue, []
        for call in queue:
            self._finish(call, "aborted", ToolOutput(aborted_text(call["name"]), is_error=True))

    # -- one call -----------------------------------------------------------

    def _unqueue(self, call: dict[str, Any]) -> None:
        """Take ``call`` off the queue if it is still waiting there."""
        if self.queue and self.queue[0] is call:
            self.queue.pop(0)

    def _finish(
        self,
        call: dict[str, Any],
        status: ToolCallStatus,
        output: ToolOutput,
        *,
        cancelled: bool = False,
    ) -> None:
        """Record and show a call's result: the one way every tool result takes
        to the log, the editor and the model, so the environment's secrets are
        redacted here (`acp_bridge.tools.secret_env`)."""
        rec = self.turn.rec
        if call["id"] not in rec.unanswered:
            rec.tool_call(call["id"], call["name"], call["input"], status)
        self._unqueue(call)
        redact = self.state.redactor
        text = redact.text(output.text)
        rec.tool_result(call["id"], _text(text), is_error=output.is_error)
        update = tool_call_update(
            {
                "toolCallId": call["id"],
                "status": "failed" if output.is_error else "completed",
                "content": redact.json(output.content) + _shown(text),
            }
        )
        if output.raw_output is not None:
            update["rawOutput"] = redact.json(output.raw_output)
        if cancelled:
            update["_meta"] = CANCELLED_META
        self.finished.add(call["id"])
        self.turn.show_tool(update)

    async def _one(self, call: dict[str, Any]) -> None:
        state, turn = self.state, self.turn
        name = call["name"]
        tool = state.registry.get(name)
        if tool is None:
            self._finish(
                call, "unavailable", ToolOutput(unavailable_tool_text(name), is_error=True)
            )
            return
        try:
            args = tool.args_model.model_validate(call["input"])
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            text = f"Invalid arguments for {name}: {problems}. It did not run."
            self._finish(call, "refused", ToolOutput(text, is_error=True))
            return
        ctx = self._context(call["id"])
        title = tool.title(args)
        paths = tool.paths(args, ctx)
        shown = tool_call_update(
            {
                "toolCallId": call["id"],
                "title": title,
                "kind": tool.kind,
                "status": "pending",
                "locations": tool.locations(args, ctx),
                "rawInput": call["input"],
            }
        )
        turn.show_tool(shown)
        outside: list[tuple[str, str]] = []
        system: list[tuple[str, str]] = []
        if paths:
            # Resolving follows symlinks: blocking file system calls, in a worker thread.
            try:
                outside, system = await anyio.to_thread.run_sync(
                    localfs.check_paths, paths, state.roots, abandon_on_cancel=True
                )
            except localfs.Refused as exc:
                text = f"{name} was refused: {exc}."
                self._finish(call, "refused", ToolOutput(text, is_error=True))
                return
            if turn.over:
                return  # stopped meanwhile: still undispatched
        if system:
            text = f"{name} was refused: " + localfs.system_text(*system[0]) + ". It did not run."
            self._finish(call, "refused", ToolOutput(text, is_error=True))
            return
        decision = perm.decide(
            mode=state.mode,
            kind=tool.kind,
            read_only=tool.read_only,
            outside=bool(outside),
            remembered=state.rules.get(tool.rule_key),
        )
        if decision == perm.REFUSE_MODE:
            self._finish(call, "refused", ToolOutput(perm.read_only_text(name), is_error=True))
            return
        if decision == perm.REFUSE_REMEMBERED:
            text = perm.declined_text(name, "they chose to always reject it")
            self._finish(call, "refused", ToolOutput(text, is_error=True))
            return
        if decision == perm.ASK:
            why = await self._ask(
                call, shown, [_spelled(p, real) for p, real in outside], tool.rule_key
            )
            if why is STOPPED:
                return
            if why is not None:
                self._finish(
                    call, "refused", ToolOutput(perm.declined_text(name, why), is_error=True)
                )
                return
        if turn.over:
            return  # stopped while asking: still undispatched
        # What the user allowed is the resolved path, and only for this call.
        ctx.allowed = tuple(real for _, real in outside)
        if state.mode == "read_only" and not tool.read_only:
            # Switched to read-only while the user was being asked.
            self._finish(call, "refused", ToolOutput(perm.read_only_text(name), is_error=True))
            return
        self.queue.pop(0)
        turn.rec.tool_call(call["id"], name, call["input"], "dispatched")
        turn.show_tool(tool_call_update({"toolCallId": call["id"], "status": "in_progress"}))
        output = await self._execute(tool, args, ctx, call)
        self._finish(call, "dispatched", output, cancelled=ctx.cancelled and not turn.over)

    async def _ask(
        self, call: dict[str, Any], shown: dict[str, Any], outside: list[str], rule_key: str
    ) -> str | None:
        """Ask the user; None when allowed, else why it was declined."""
        state, turn = self.state, self.turn
        tool_call = {k: v for k, v in shown.items() if k != "sessionUpdate"}
        if state.asker is not None:  # a subagent the editor does not know: named here
            tool_call["title"] = f"{state.asker}: {tool_call.get('title', call['name'])}"
            tool_call["toolCallId"] = f"{state.call_prefix}{tool_call['toolCallId']}"
        if outside:
            text = perm.outside_text(outside)
            tool_call["content"] = _shown(text[:1].upper() + text[1:])
        offered = perm.OUTSIDE_OPTIONS if outside else perm.OPTIONS
        params = {"sessionId": state.session_id, "toolCall": tool_call, "options": offered}
        option: str | None = None
        try:
            result = await turn.await_editor(
                "permission:" + call["id"],
                lambda: state.request("session/request_permission", params),
            )
        except anyio.get_cancelled_exc_class():
            # A Stop while the user was being asked: our request is cancelled
            # ($/cancel_request) and the call never runs.
            self._permission_stopped(call)
            raise
        except (RemoteError, ConnectionClosed) as exc:
            log.info("permission request for %s failed: %s", call["id"], exc)
        else:
            option, problem = perm.chosen(result, offered)
            if problem is not None:
                log.warning(
                    "permission answer for %s taken as a dismissal: %s", call["id"], problem
                )
        if option is None and turn.over:
            # The editor answered "cancelled" because the user pressed Stop.
            self._permission_stopped(call)
            return STOPPED
        where = f" ({perm.outside_text(outside)})" if outside else ""
        if option is None:
            return "they dismissed the permission request" + where
        if option in (perm.ALLOW_ALWAYS, perm.REJECT_ALWAYS) and not outside and not turn.ended:
            state.remember(rule_key, option)
        if option in (perm.ALLOW_ONCE, perm.ALLOW_ALWAYS):
            return None
        always = option == perm.REJECT_ALWAYS
        return ("they chose to always reject it" if always else "they rejected it") + where

    def _permission_stopped(self, call: dict[str, Any]) -> None:
        text = permission_stopped_text(call["name"])
        self._finish(call, "aborted", ToolOutput(text, is_error=True))

    async def _execute(
        self, tool: Any, args: Any, ctx: ToolContext, call: dict[str, Any]
    ) -> ToolOutput:
        turn = self.turn
        try:
            async with turn.in_flight.track("tool:" + call["id"]) as scope:
                self.running = _Running(call["id"], scope, ctx)
                try:
                    with anyio.move_on_after(self.state.tool_timeout) as timer:
                        output: ToolOutput = await tool.run(args, ctx)
                        return output
                finally:
                    self.running = None
                    if ctx.live is not None and ctx.live.exited:
                        self.finished.add(ctx.live.terminal_id)
            if timer.cancelled_caught:
                if ctx.partial is not None:
                    return ctx.partial
                return ToolOutput(
                    f"{call['name']} timed out after {self.state.tool_timeout:g} s: stopped.",
                    is_error=True,
                )
            if ctx.cancelled and not turn.over:  # this call alone (`cancel_call`)
                return ctx.partial or ToolOutput(cancelled_text(call["name"]), is_error=True)
            # The in-flight scope was cancelled (a Stop) and the tool swallowed it.
            return ctx.partial or ToolOutput(stopped_text(call["name"]), is_error=True)
        except anyio.get_cancelled_exc_class():
            output = ctx.partial or ToolOutput(stopped_text(call["name"]), is_error=True)
            self._finish(call, "dispatched", output)
            raise
        except ToolError as exc:
            return ToolOutput(f"{call['name']} failed: {exc}", is_error=True)
        except RemoteError as exc:
            return ToolOutput(
                f"{call['name']} failed: the editor answered an error: {exc.message} ({exc.code})",
                is_error=True,
            )
        except ConnectionClosed:
            return ToolOutput(f"{call['name']} failed: the editor went away", is_error=True)
        except Exception as exc:
            log.exception("tool %s failed", call["name"])
            return ToolOutput(
                f"{call['name']} failed with an internal error: {type(exc).__name__}: {exc}",
                is_error=True,
            )

    def _context(self, call_id: str) -> ToolContext:
        state, turn = self.state, self.turn
        share = max(state.cancel_deadline * 0.3, 0.05)

        async def refuse_if_stopped() -> None:
            # Never start an editor request for a stopped turn.
            if turn.over:
                await anyio.lowlevel.checkpoint()
                raise ToolError("the turn was stopped")

        async def request(method: str, params: dict[str, Any]) -> Any:
            await refuse_if_stopped()
            return await turn.await_editor(
                f"{method}:{call_id}", lambda: state.request(method, params)
            )

        async def cleanup(method: str, params: dict[str, Any]) -> Any | None:
            if turn.ended:
                return None
            with anyio.CancelScope(shield=True), anyio.move_on_after(share):
                try:
                    return await state.request(method, params)
                except (RemoteError, ConnectionClosed) as exc:
                    log.info("%s during cleanup failed: %s", method, exc)
            return None

        async def settle(method: str, params: dict[str, Any]) -> Any:
            """A request whose effect must be known (a terminal created, a file
            written): a Stop does not abandon it, it waits a bounded while for
            the answer (then cancels it)."""
            await refuse_if_stopped()
            box: dict[str, Any] = {}
            done = anyio.Event()

            async def call() -> None:
                try:
                    box["result"] = await state.request(method, params)
                except (RemoteError, ConnectionClosed) as exc:
                    box["error"] = exc
                finally:
                    done.set()

            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    with turn.awaiting_editor(), anyio.move_on_after(state.tool_timeout):
                        async with turn.in_flight.track(f"{method}:{call_id}"):
                            await done.wait()
                    if not done.is_set():
                        with anyio.move_on_after(share):
                            await done.wait()
                        tg.cancel_scope.cancel()
            # A Stop is raised by the tool's next editor request: it still
            # learns what this one did (a terminal to kill and release).
            if "error" in box:
                raise box["error"]
            if "result" not in box:
                raise ToolError(f"the editor did not answer {method}")
            return box["result"]

        def update(fields: dict[str, Any]) -> None:
            shown = state.redactor.json(fields)
            turn.show_tool(tool_call_update({"toolCallId": call_id, **shown}))

        return ToolContext(
            session_id=state.session_id,
            cwd=state.cwd,
            roots=state.roots,
            capabilities=state.capabilities,
            call_id=call_id,
            request=request,
            settle=settle,
            cleanup=cleanup,
            update=update,
            stopped=lambda: turn.over,
            hidden_env=state.hidden_env,
            timeout_s=state.tool_timeout,
            emit=turn.emit,
            plans=state.plan_store(),
            workspace=state.workspace,
            subagents=state.subagents,
            live=LiveTerminal(turn.emit, state.redactor),
        )
