"""``session/close`` stops the session's prompts as it is read, as ``session/cancel`` does.

The close itself runs in a task of its own, a moment after it is read.  Before
the fix the running turn was stopped only then, so a turn that ended in that
moment answered ``end_turn`` although the agent had read the close (and
answered a request sent right behind it): ``acp-bridge check`` saw
``close.cancels`` fail against ``acp-bridge --provider fake``.  Here the frame
is fed to the connection and the handler's task is never run: what stopped
the prompts is the read alone.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from acp_bridge.acp.agent import Agent
from acp_bridge.jsonrpc.connection import Connection
from acp_bridge.loop.lifecycle import TurnConfig

pytestmark = pytest.mark.anyio


class Wire:
    """The connection's writer: keeps the frames."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes) -> None:
        self.frames.append(frame)

    def flush_now(self) -> None:
        pass


class Prompts:
    """What the hook calls of a session's prompts."""

    def __init__(self) -> None:
        self.cancelled = 0

    def cancel(self, spawn: object, cause: str = "user") -> None:
        self.cancelled += 1


class StubSession:
    def __init__(self) -> None:
        self.prompts = Prompts()


class Spawned:
    """A task group that records what it is asked to start and runs none of it."""

    def __init__(self) -> None:
        self.started: list[Any] = []

    def start_soon(self, func: Any, *args: Any) -> None:
        self.started.append((func, args))


def frame(method: str, params: dict[str, Any], rid: int = 1) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"


async def test_a_close_stops_the_running_prompt_when_it_is_read(tmp_path: Any) -> None:
    wire = Wire()
    conn = Connection(wire)
    spawned = Spawned()
    agent = Agent(
        conn,
        wire,  # type: ignore[arg-type]
        state_dir=str(tmp_path),
        config=TurnConfig(),
        spawn=spawned.start_soon,
    )
    conn.bind(spawned)  # type: ignore[arg-type]
    session = StubSession()
    other = StubSession()
    agent.table.sessions["sess_a"] = session  # type: ignore[assignment]
    agent.table.sessions["sess_b"] = other  # type: ignore[assignment]
    conn.feed(frame("session/close", {"sessionId": "sess_a"}))
    assert session.prompts.cancelled == 1, "stopped at the read, before the close's task ran"
    assert other.prompts.cancelled == 0
    assert [f.__name__ for f, _ in spawned.started] == ["_run_request"], "the close still runs"
    # A close of an unknown session, or one without a valid id, stops nothing and
    # is left to the handler (which answers it).
    conn.feed(frame("session/close", {"sessionId": "sess_unknown"}, 2))
    conn.feed(frame("session/close", {"sessionId": 7}, 3))
    assert (session.prompts.cancelled, other.prompts.cancelled) == (1, 0)
    assert len(spawned.started) == 3
