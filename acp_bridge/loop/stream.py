"""The open model stream of one step, and the watch that ends a silent one."""

from __future__ import annotations

import uuid

import anyio

from .assembler import StreamAssembler

__all__ = ["IdleWatch", "StepStream"]


class StepStream:
    """The open model stream of the current step."""

    __slots__ = ("asm", "attempt", "chunk_prefixes", "message_id")

    def __init__(self) -> None:
        self.attempt = "att_" + uuid.uuid4().hex[:16]
        # One id for the model response: its reasoning and its text are one
        # assistant message to the editor, as they are in the history.
        self.message_id = "msg_" + uuid.uuid4().hex[:16]
        self.asm = StreamAssembler()
        # How this stream's text and reasoning frames start (see
        # `acp_bridge.loop.ending.retract_queued`).
        self.chunk_prefixes: tuple[bytes, ...] = ()


class IdleWatch:
    """Cancels the step's scope when no stream event arrives for ``limit`` seconds.

    The hot loop only bumps a counter; this task looks at it a few times per
    limit, which costs nothing per chunk.
    """

    def __init__(self, limit: float | None, step_scope: anyio.CancelScope) -> None:
        self.limit = limit
        self.seen = 0
        self.paused = False
        # Extra seconds of silence allowed while no event has followed the
        # one counted as ``grace_seen`` (a provider's announced wait before a
        # retry).
        self.grace = 0.0
        self.grace_seen = -1
        self.fired = False
        self._step_scope = step_scope
        self._own_scope = anyio.CancelScope()

    def stop(self) -> None:
        self._own_scope.cancel()

    async def run(self) -> None:
        assert self.limit is not None
        tick = self.limit / 4
        last, quiet = self.seen, 0.0
        with self._own_scope:
            while True:
                await anyio.sleep(tick)
                if self.seen != last or self.paused:
                    last, quiet = self.seen, 0.0
                    continue
                quiet += tick
                allowed = self.limit + (self.grace if self.seen == self.grace_seen else 0.0)
                if quiet >= allowed:
                    self.fired = True
                    self._step_scope.cancel()
                    return
