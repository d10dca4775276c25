"""How the test editor answers the agent's questions: permissions and elicitations.

A permission policy gets a `PermissionRequest` and returns the result of
``session/request_permission``; an elicitation policy gets the params of
``elicitation/create`` and returns its result.  Set them on the agent::

    agent.permissions = allow_once()                 # every request
    agent.permissions = in_order(allow_once(), reject_once())
    agent.permissions = wait_for_stop()              # unanswered until Stop
    agent.elicitations = accept({"name": "Ada"})

Options are chosen by their ``kind`` (``allow_once``, ``allow_always``,
``reject_once``, ``reject_always``), so a policy works with any agent's
option ids.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..jsonrpc.errors import RemoteError

Json = dict[str, Any]


@dataclass
class PermissionRequest:
    """A ``session/request_permission`` the agent sent."""

    params: Json
    stopped: anyio.Event = field(default_factory=anyio.Event)
    """Set when the test stops the request's session (sends ``session/cancel``)."""
    answer: Json | None = None
    """The result the editor answered, once it has."""

    @property
    def session_id(self) -> str | None:
        value = self.params.get("sessionId")
        return value if isinstance(value, str) else None

    @property
    def tool_call(self) -> Json:
        value = self.params.get("toolCall")
        return value if isinstance(value, dict) else {}

    @property
    def options(self) -> list[Json]:
        value = self.params.get("options")
        return [o for o in value if isinstance(o, dict)] if isinstance(value, list) else []

    def option(self, kind: str) -> str | None:
        """The ``optionId`` of the first option of ``kind``, if the agent offered one."""
        for option in self.options:
            if option.get("kind") == kind and isinstance(option.get("optionId"), str):
                return str(option["optionId"])
        return None


PermissionPolicy = Callable[[PermissionRequest], Awaitable[Json]]
ElicitationPolicy = Callable[[Json], Awaitable[Json]]

CANCELLED: Json = {"outcome": {"outcome": "cancelled"}}
"""The permission outcome of a request dismissed, or pending when the turn is stopped."""


def select(kind: str) -> PermissionPolicy:
    """Choose the option of ``kind``; an error (-32602) if the agent offered none."""

    async def policy(request: PermissionRequest) -> Json:
        option = request.option(kind)
        if option is None:
            offered = [o.get("kind") for o in request.options]
            raise RemoteError(-32602, f"the test wanted a {kind!r} option; offered: {offered}")
        return {"outcome": {"outcome": "selected", "optionId": option}}

    return policy


def allow_once() -> PermissionPolicy:
    return select("allow_once")


def allow_always() -> PermissionPolicy:
    return select("allow_always")


def reject_once() -> PermissionPolicy:
    return select("reject_once")


def reject_always() -> PermissionPolicy:
    return select("reject_always")


def dismiss() -> PermissionPolicy:
    """Answer ``cancelled`` at once (the user closed the prompt)."""

    async def policy(request: PermissionRequest) -> Json:
        return CANCELLED

    return policy


def wait_for_stop() -> PermissionPolicy:
    """Leave the request unanswered until the test stops its session, then answer
    ``cancelled``, as ACP requires of a client ("The Client MUST respond to all
    pending session/request_permission requests with the cancelled outcome")."""

    async def policy(request: PermissionRequest) -> Json:
        await request.stopped.wait()
        return CANCELLED

    return policy


def in_order(*policies: PermissionPolicy, then: PermissionPolicy | None = None) -> PermissionPolicy:
    """The first request gets the first policy, the second the second, ...; requests
    after the last get ``then`` (default: `dismiss`)."""
    queue = list(policies)
    rest = then or dismiss()

    async def policy(request: PermissionRequest) -> Json:
        current = queue.pop(0) if queue else rest
        return await current(request)

    return policy


def accept(content: Json | None = None) -> ElicitationPolicy:
    """Accept every elicitation, with ``content`` as the form's answer."""

    async def policy(params: Json) -> Json:
        result: Json = {"action": "accept"}
        if content is not None:
            result["content"] = content
        return result

    return policy


def decline() -> ElicitationPolicy:
    """Decline every elicitation (the default)."""

    async def policy(params: Json) -> Json:
        return {"action": "decline"}

    return policy


def cancel() -> ElicitationPolicy:
    """Cancel every elicitation (the user dismissed it)."""

    async def policy(params: Json) -> Json:
        return {"action": "cancel"}

    return policy


__all__ = [
    "CANCELLED",
    "ElicitationPolicy",
    "PermissionPolicy",
    "PermissionRequest",
    "accept",
    "allow_always",
    "allow_once",
    "cancel",
    "decline",
    "dismiss",
    "in_order",
    "reject_always",
    "reject_once",
    "select",
    "wait_for_stop",
]
