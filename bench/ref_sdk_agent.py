"""Reference ACP agent written idiomatically with the official Python SDK (``acp``).

Every ``session/prompt`` streams ``agent_message_chunk`` text chunks ("tok ") as fast as
the SDK allows until ``session/cancel`` arrives for that session, then answers
``{"stopReason": "cancelled"}``.  It is the "what you get with the SDK" baseline of the
benchmark, so it is written the way an SDK user would write it:

* each update is built with the SDK helpers and sent with ``await conn.session_update(...)``;
  awaiting it keeps the updates in order and yields to the event loop on every chunk, which
  is what lets the SDK run the ``session/cancel`` handler (each inbound message gets its own
  task) while the prompt is streaming;
* the prompt returns only after its last update has been written, and the SDK writes the
  response after that, so nothing of the turn follows the response.

With ``--one-line``, every prompt is answered with one chunk and ``end_turn`` instead (the
turn overhead benchmark).

Run it with stdout connected to a pipe: ``acp.run_agent`` uses a pipe transport for stdout
and refuses a regular file.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import Any, NoReturn

import acp
from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    text_block,
    update_agent_message,
)
from acp.schema import AgentCapabilities, Implementation

AGENT_NAME = "ref-sdk-agent"
AGENT_VERSION = "0.1.0"
CHUNK_TEXT = "tok "
ONE_LINE_TEXT = "Done."


class RefSdkAgent(acp.Agent):
    """Endless streaming agent: one active turn per session, cancellable."""

    agent_name = AGENT_NAME  # what ``initialize`` answers in agentInfo

    def __init__(self, one_line: bool = False) -> None:
        self._one_line = one_line
        self._conn: acp.Client | None = None
        self._sessions: set[str] = set()
        # Session id -> "stop" event of the turn currently running in that session.
        self._turns: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: acp.Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name=self.agent_name, version=AGENT_VERSION),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session_id = f"sess_{uuid.uuid4().hex}"
        self._sessions.add(session_id)
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id not in self._sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "reason": "unknown"})
        if session_id in self._turns:
            raise acp.RequestError.invalid_request({"reason": "a prompt is already running"})
        assert self._conn is not None
        if self._one_line:
            await self._conn.session_update(
                session_id, update_agent_message(text_block(ONE_LINE_TEXT))
            )
            return PromptResponse(stop_reason="end_turn")
        stop = asyncio.Event()
        self._turns[session_id] = stop
        try:
            while not stop.is_set():
                # Awaiting the send keeps chunks ordered and yields to the loop each time,
                # so the session/cancel task gets to run between two chunks.
                await self._conn.session_update(
                    session_id, update_agent_message(text_block(CHUNK_TEXT))
                )
        finally:
            del self._turns[session_id]
        return PromptResponse(stop_reason="cancelled")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        stop = self._turns.get(session_id)
        if stop is not None:
            stop.set()

    # Everything else is unsupported.  acp.Agent is a typing.Protocol whose inherited stubs
    # would answer these requests with an empty result, so refuse them explicitly.
    async def load_session(self, cwd: str, session_id: str, *args: Any, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("session/load")

    async def list_sessions(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("session/list")

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("session/set_mode")

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> NoReturn:
        raise acp.RequestError.method_not_found("session/set_config_option")

    async def authenticate(self, method_id: str, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("authenticate")

    async def fork_session(self, session_id: str, cwd: str, *args: Any, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("session/fork")

    async def resume_session(
        self, session_id: str, cwd: str, *args: Any, **kwargs: Any
    ) -> NoReturn:
        raise acp.RequestError.method_not_found("session/resume")

    async def close_session(self, session_id: str, **kwargs: Any) -> NoReturn:
        raise acp.RequestError.method_not_found("session/close")

    async def ext_method(self, method: str, params: dict[str, Any]) -> NoReturn:
        raise acp.RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def main() -> None:
    await acp.run_agent(RefSdkAgent(one_line="--one-line" in sys.argv[1:]))


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main())
