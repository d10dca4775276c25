"""The prompts of one session, from arrival to answer, in one place.

Prompts of one session run one at a time, in arrival order; a second prompt
waits for the running turn to end (an editor that sends a new message usually
sends ``session/cancel`` first).  The queue knows every prompt it has been
told about:

* `arrived` is called when the request is read, before its handler task
  runs, so a cancel that follows in the same read covers it;
* `cancel` (``session/cancel``) stops the running turn and marks every
  waiting prompt cancelled: each still starts its turn, which records the
  user's message and ends ``cancelled`` without a model request.  An idle
  session keeps no sticky flag;
* `cancel_request` (``$/cancel_request``) does the same for one prompt;
* `cancel_tool_call` and `cancel_terminal` (ACP v2's ``tool_call/cancel``
  and ``terminal/cancel``) stop one running tool call, or the command of one
  terminal, of the running turn, which goes on
  (`acp_bridge.tools.runner.ToolRunner.cancel_call`);
* `run` waits for the prompt's turn, runs it, and answers the moment it ends
  (the turn's updates and records are already queued ahead of the answer on
  the one ordered writer).  What the protocol edge supplies for one prompt
  (its settings, the kind of turn to build, how to answer) is one `PromptHost`.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from ..jsonrpc.errors import RequestId
from ..log.upcast import gc_paused
from .lifecycle import TurnConfig, TurnKind
from .session_core import SessionCore
from .turn import Spawn, Turn

__all__ = ["PromptHost", "PromptQueue", "stop"]

log = logging.getLogger("acp_bridge.prompts")


class PromptHost(Protocol):
    """What the protocol edge supplies for one prompt's turn."""

    @property
    def config(self) -> TurnConfig: ...

    @property
    def spawn(self) -> Spawn: ...

    @property
    def running(self) -> set[Turn]:
        """Where a turn is while its task runs (an abandoned one included)."""
        ...

    def before_start(self) -> TurnKind | None:
        """Called under the queue's lock just before the turn would start:
        the kind of turn to build (a regenerate's target is known only now),
        or None to start nothing (shutdown); it may raise to refuse the prompt."""
        ...

    def started(self, turn: Turn) -> None:
        """The turn's start is logged (a v2 prompt is answered then)."""
        ...

    def answer(self, turn: Turn) -> None:
        """Answer the prompt; called the moment the turn ends."""
        ...


class PromptQueue:
    def __init__(self, session: SessionCore) -> None:
        self.session = session
        # A semaphore, not a lock: the turn's ending frees it, in whichever
        # task ends the turn (see `run`); taken without a trip through the
        # event loop when no other prompt of the session holds it.
        self._lock = anyio.Semaphore(1, fast_acquire=True)
        # Prompts received and not started yet, by request id: True once a
        # cancel has covered them.
        self.waiting: dict[RequestId, bool] = {}
        self.active: Turn | None = None
        self.turns = 0

    def arrived(self, request_id: RequestId) -> None:
        self.waiting[request_id] = False

    def withdraw(self, request_id: RequestId) -> None:
        """The prompt was refused (bad params): it will not run."""
        self.waiting.pop(request_id, None)

    def cancel(self, spawn: Spawn, cause: str = "user") -> None:
        """Stop the running turn and every prompt received so far."""
        for request_id in self.waiting:
            self.waiting[request_id] = True
        if self.active is not None:
            stop(self.active, cause, spawn)

    def cancel_request(self, request_id: RequestId, spawn: Spawn) -> None:
        """Stop one prompt only, waiting or running."""
        if request_id in self.waiting:
            self.waiting[request_id] = True
        turn = self.active
        if turn is not None and turn.request_id == request_id:
            stop(turn, "user", spawn)

    def cancel_tool_call(self, call_id: str) -> str | None:
        """Cancel the running tool call ``call_id`` alone: None when accepted,
        else why not (unknown, not running yet, finished)."""
        turn = self.active
        if turn is not None and not turn.over:
            return turn.tools.cancel_call(call_id)
        records = self.session.log.records
        if any(r["type"] == "tool/result" and r["tool_call_id"] == call_id for r in records):
            return f"the tool call {call_id} has already finished"
        return f"no tool call {call_id} is running in this session"

    async def cancel_terminal(self, terminal_id: str) -> str | None:
        """Kill the command of the running turn's terminal ``terminal_id``: None
        when accepted, else why not."""
        turn = self.active
        if turn is None or turn.over:
            return f"no terminal {terminal_id} is running in this session"
        return await turn.tools.cancel_terminal(terminal_id)

    async def run(self, request_id: RequestId, host: PromptHost) -> Turn | None:
        """Run one prompt's turn when its time comes; None when it started none."""
        config, spawn, lock = host.config, host.spawn, self._lock
        await lock.acquire()
        # The lock is the turn's until it ends, not until this task returns:
        # a turn the watchdog abandoned (its task stuck in a provider that
        # ignores the Stop) frees the session's next prompt when it ends.
        held = True

        def free() -> None:
            nonlocal held
            if held:
                held = False
                lock.release()

        def ended(turn: Turn) -> None:
            # The turn's ending, in whichever task ran it: answer, then free.
            try:
                host.answer(turn)
            finally:
                if self.active is turn:
                    self.active = None
                free()

        try:
            cancelled_early = self.waiting.pop(request_id, False)
            kind = host.before_start()
            if not kind:
                return None
            self.turns += 1
            turn = Turn(
                self.session, self.turns, kind, config, spawn, answer=ended, started=host.started
            )
            turn.request_id = request_id
            self.active = turn
            if cancelled_early:
                # A cancel arrived before this turn could start: it still
                # records the user's message, then ends as cancelled.
                turn.cancel("user")
            host.running.add(turn)
            try:
                # In this task: a task of its own would cost a spawn and a
                # trip through the event loop at each end.
                await turn.run()
            finally:
                host.running.discard(turn)
                if not turn.ended:
                    # The handler is being torn down (shutdown): stop the turn
                    # as a disconnect and give it the deadline to record that.
                    turn.cancel("disconnected")
                    deadline = config.cancel_deadline
                    with anyio.CancelScope(shield=True), anyio.move_on_after(deadline):
                        await turn.settled.wait()
                if self.active is turn:
                    self.active = None
        finally:
            free()
        return turn


def stop(turn: Turn, cause: str, spawn: Spawn) -> None:
    """Stop a turn; if it does not end at once, the watchdog bounds the wait.

    No garbage collection runs while a streaming turn records its end and
    answers: a collection costs 0.1-1 ms (a turn leaves a few hundred objects
    in reference cycles), and one that started in here would be the slowest
    Stop the editor sees.  Collections resume once the answer is out."""
    with gc_paused():
        stopping = turn.cancel(cause)
    if stopping:  # it has not ended yet
        spawn(turn.watchdog)
