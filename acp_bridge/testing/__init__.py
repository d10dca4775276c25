"""acp-bridge's test kit: drive an ACP agent from pytest and snapshot its sessions.

Install it with ``pip install 'acp-bridge-agent[testing]'``; its pytest plugin
(`acp_bridge.testing.plugin`) gives every test the ``acp_agent``,
``acp_workspace`` and ``acp_snapshot`` fixtures::

    import pytest
    from acp_bridge.testing import transcript_snapshot

    @pytest.mark.anyio
    async def test_hello(acp_agent, acp_snapshot):
        async with acp_agent.bridge(script="sessions/hello.json") as agent:
            await agent.initialize()
            session = await agent.new_session()
            result = await session.prompt("Hello")
            assert result.stop_reason == "end_turn"
            assert await agent.finish() == 0
        assert transcript_snapshot(agent) == acp_snapshot

The API is documented in ``docs/testing.md`` and versioned with the package
(`__version__`): a change that breaks a test written against it is a new
minor version before 1.0, a new major version after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__
from ..client import AcpClient, PromptResult
from .agent import (
    CLIENT_INFO,
    SETTLE_METHOD,
    STDIN_CLOSED,
    Agent,
    AgentError,
    Session,
    Turn,
    TurnEnded,
    client_capabilities,
    session_update,
    start_agent,
    text_prompt,
)
from .launcher import AgentLauncher
from .normalize import coalesce_deltas, normalize
from .policies import (
    CANCELLED,
    ElicitationPolicy,
    PermissionPolicy,
    PermissionRequest,
    accept,
    allow_always,
    allow_once,
    cancel,
    decline,
    dismiss,
    in_order,
    reject_always,
    reject_once,
    select,
    wait_for_stop,
)
from .transcript import transcript_snapshot
from .workspace import FULL_CAPABILITIES, NO_CAPABILITIES, Terminal, WorkspaceEditor

if TYPE_CHECKING:
    from .snapshot import TranscriptSnapshot


def __getattr__(name: str) -> Any:
    # The syrupy extension is imported on first use: the rest of the kit works
    # without syrupy.
    if name == "TranscriptSnapshot":
        from .snapshot import TranscriptSnapshot

        return TranscriptSnapshot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CANCELLED",
    "CLIENT_INFO",
    "FULL_CAPABILITIES",
    "NO_CAPABILITIES",
    "SETTLE_METHOD",
    "STDIN_CLOSED",
    "AcpClient",
    "Agent",
    "AgentError",
    "AgentLauncher",
    "ElicitationPolicy",
    "PermissionPolicy",
    "PermissionRequest",
    "PromptResult",
    "Session",
    "Terminal",
    "TranscriptSnapshot",
    "Turn",
    "TurnEnded",
    "WorkspaceEditor",
    "__version__",
    "accept",
    "allow_always",
    "allow_once",
    "cancel",
    "client_capabilities",
    "coalesce_deltas",
    "decline",
    "dismiss",
    "in_order",
    "normalize",
    "reject_always",
    "reject_once",
    "select",
    "session_update",
    "start_agent",
    "text_prompt",
    "transcript_snapshot",
    "wait_for_stop",
]
