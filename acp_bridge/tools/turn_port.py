"""What the tool runner sees of the turn it runs in: a narrow protocol.

The runner (`acp_bridge.tools.runner`) never imports the turn: it is given an
object with these members (`acp_bridge.loop.turn.Turn` is one), so the
imports point one way, from the loop down to the tools.

* ``over``: a stop was asked, or the turn has ended; start nothing new;
* ``ended``: the turn's ending is recorded; nothing more may reach the editor
  or the log (a task abandoned at the cancel deadline that wakes up later);
* ``rec``: the turn's records of tool calls and their results;
* ``in_flight``: work a Stop must see finish (`acp_bridge.loop.inflight`);
* ``show_tool``: record a ``tool_call``/``tool_call_update`` and send it;
* ``await_editor``/``awaiting_editor``: a request to the editor made while
  running tools; the turn is in its AWAITING_EDITOR state meanwhile;
* ``emit``: send another session/update of the turn (``update_plan``'s plan).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol, TypeVar

import anyio

from ..log.records import ToolCallStatus

__all__ = ["InFlightWork", "ToolRecords", "TurnPort"]

T = TypeVar("T")


class ToolRecords(Protocol):
    """The recorder's tool vocabulary (``tool/call``, ``tool/result``)."""

    @property
    def unanswered(self) -> dict[str, str]:
        """Tool calls recorded without their result yet: id -> name."""
        ...

    def tool_call(self, call_id: str, name: str, input: object, status: ToolCallStatus) -> None: ...

    def tool_result(
        self, call_id: str, content: list[dict[str, Any]], *, is_error: bool
    ) -> None: ...


class InFlightWork(Protocol):
    def track(self, label: str) -> AbstractAsyncContextManager[anyio.CancelScope]: ...


class TurnPort(Protocol):
    @property
    def over(self) -> bool: ...

    @property
    def ended(self) -> bool: ...

    @property
    def rec(self) -> ToolRecords: ...

    @property
    def in_flight(self) -> InFlightWork: ...

    def show_tool(self, update: dict[str, Any]) -> None: ...

    async def await_editor(self, label: str, request: Callable[[], Awaitable[T]]) -> T: ...

    def awaiting_editor(self) -> AbstractContextManager[None]: ...

    def emit(self, update: dict[str, Any]) -> None:
        """Send a session/update of the turn (a plan); nothing once it has ended."""
        ...
