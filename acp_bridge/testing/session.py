"""The kit's sessions and turns: what a test does with one session of an agent.

`acp_bridge.testing.agent.Agent` makes them (``new_session``, ``load_session``,
...); a `Session` prompts and stops, a `Turn` waits for what the test needs
(chunks, an update, a permission request) and ends with its response.  They
need of the agent only the few members of `KitAgent`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio

from ..client import (
    CHUNK_KINDS,
    AcpClient,
    AgentExited,
    PromptResult,
    RequestId,
    id_key,
    is_response,
)
from .policies import PermissionRequest

Json = dict[str, Any]

__all__ = [
    "KitAgent",
    "Session",
    "Turn",
    "TurnEnded",
    "session_update",
    "text_prompt",
    "turn_end",
]


class TurnEnded(Exception):
    """The turn was answered before what the test waited for happened."""

    def __init__(self, what: str, response: Json) -> None:
        super().__init__(f"the turn ended before {what}: {response}")
        self.response = response


def text_prompt(session_id: str, content: str | Sequence[Json]) -> Json:
    """The params of a ``session/prompt``: a text, or a list of content blocks."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return {"sessionId": session_id, "prompt": blocks}


def turn_end(msg: Json, session_id: str) -> Json | None:
    """The update of an ACP v2 ``idle`` ``state_update`` of ``session_id`` (what
    ends a v2 turn), else None."""
    update = session_update(msg, session_id)
    if update is None or update.get("sessionUpdate") != "state_update":
        return None
    return update if update.get("state") == "idle" else None


def session_update(msg: Json, session_id: str) -> Json | None:
    """The ``update`` of a ``session/update`` message of ``session_id``, else None."""
    if msg.get("method") != "session/update":
        return None
    params = msg.get("params")
    if not isinstance(params, dict) or params.get("sessionId") != session_id:
        return None
    update = params.get("update")
    return update if isinstance(update, dict) else None


class KitAgent(Protocol):
    """What a `Session` and its turns use of the agent that made them."""

    client: AcpClient
    permission_requests: list[PermissionRequest]
    protocol: int

    async def request(self, method: str, params: Json, *, within: float = 30) -> Any: ...

    async def settle(self, *, within: float = 30) -> None: ...

    async def disconnect(self) -> None: ...

    def updates(self, session_id: str) -> list[Json]: ...

    def _stopped(self, session_id: str) -> None: ...

    async def wait_for_permission(
        self, session_id: str | None = None, *, since: int = 0, within: float = 30
    ) -> PermissionRequest: ...


class Session:
    """A session of an `Agent`: prompts, Stop, close."""

    def __init__(self, agent: KitAgent, session_id: str, cwd: str, response: Json) -> None:
        self.agent = agent
        self.id = session_id
        self.cwd = cwd
        self.response = response  # the result of session/new, load, resume or fork
        self.replayed: list[Json] = []

    async def start_prompt(
        self, content: str | Sequence[Json], *, stop_at_once: bool = False
    ) -> Turn:
        """Send ``session/prompt`` and return its `Turn` without waiting.

        With ``stop_at_once``, ``session/cancel`` goes in the same write, right
        after the prompt (an editor whose user stops at once).
        """
        client = self.agent.client
        start = len(client.messages)
        rid = client.next_id()
        message = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": text_prompt(self.id, content),
        }
        turn = Turn(self, rid, start)
        if stop_at_once:
            cancel = {
                "jsonrpc": "2.0",
                "method": "session/cancel",
                "params": {"sessionId": self.id},
            }
            await client.send(message, cancel)
            turn.stop_sent = True
            self.agent._stopped(self.id)
        else:
            await client.send(message)
        return turn

    async def prompt(
        self,
        content: str | Sequence[Json],
        *,
        stop_after: int | None = None,
        within: float = 60,
    ) -> PromptResult:
        """A whole turn: the prompt, and its response.  With ``stop_after``, Stop
        (``session/cancel``) once that many message or thought chunks arrived;
        a turn that ends first is not stopped."""
        turn = await self.start_prompt(content)
        if stop_after is not None:
            try:
                await turn.wait_for_chunks(stop_after, within=within)
            except TurnEnded:
                return await turn.result(within=within)
            return await turn.stop(within=within)
        return await turn.result(within=within)

    async def stop(self) -> None:
        """Stop the running turn: send ``session/cancel`` and answer the session's
        pending permission requests that wait for it (`policies.wait_for_stop`)."""
        await self.agent.client.notify("session/cancel", {"sessionId": self.id})
        self.agent._stopped(self.id)

    async def close(self) -> Json:
        """``session/close``: the result."""
        return dict(await self.agent.request("session/close", {"sessionId": self.id}))

    def updates(self) -> list[Json]:
        """Every update of this session received so far."""
        return self.agent.updates(self.id)


class Turn:
    """A prompt sent and not yet awaited (see `Session.start_prompt`).

    ``response`` is what ended the turn: in ACP v1 the prompt's response; in v2
    the ``idle`` ``state_update`` (the whole ``session/update`` message), or an
    error answered to the prompt.  In v2 ``accepted`` is the prompt's response
    (its ``messageId``), which comes at once."""

    def __init__(self, session: Session, request_id: RequestId, start: int) -> None:
        self.session = session
        self.request_id = request_id
        self.updates: list[Json] = []  # of this session, before the response
        self.response: Json | None = None
        self.accepted: Json | None = None
        self.v2 = session.agent.protocol == 2
        self.stop_sent = False
        self._key = id_key(request_id)
        self._asks = len(session.agent.permission_requests)  # asked before the turn
        self._pos = start  # next message of client.messages to look at
        self._response_pos: int | None = None

    @property
    def client(self) -> AcpClient:
        return self.session.agent.client

    @property
    def done(self) -> bool:
        """Whether the prompt has been answered."""
        self._scan()
        return self.response is not None

    def chunks(self, kinds: frozenset[str] = CHUNK_KINDS) -> int:
        """How many chunks (message and thought by default) arrived so far."""
        self._scan()
        return sum(u.get("sessionUpdate") in kinds for u in self.updates)

    def text(self, kind: str = "agent_message_chunk") -> str:
        """The text of the turn's chunks of ``kind`` so far."""
        self._scan()
        return PromptResult({}, self.updates).text(kind)

    def _scan(self) -> None:
        messages = self.client.messages
        while self.response is None and self._pos < len(messages):
            msg = messages[self._pos]
            if is_response(msg) and id_key(msg["id"]) == self._key:
                if self.v2 and "error" not in msg:
                    self.accepted = msg
                else:
                    self.response = msg
                    self._response_pos = self._pos
            elif self.v2 and turn_end(msg, self.session.id) is not None:
                self.response = msg
                self._response_pos = self._pos
            else:
                update = session_update(msg, self.session.id)
                if update is not None:
                    self.updates.append(update)
            self._pos += 1

    async def _until(self, what: str, condition: Callable[[], bool], within: float) -> None:
        def met() -> bool:
            self._scan()
            return condition() or self.response is not None

        await self.client.wait_until(met, within=within)
        if not condition():
            assert self.response is not None
            raise TurnEnded(what, self.response)

    async def wait_for_chunks(
        self, n: int, *, kinds: frozenset[str] = CHUNK_KINDS, within: float = 30
    ) -> None:
        """Until ``n`` chunks of ``kinds`` arrived; `TurnEnded` if the turn ends first."""
        await self._until(f"{n} chunks", lambda: self.chunks(kinds) >= n, within)

    async def wait_for_update(self, kind: str, *, within: float = 30) -> Json:
        """The first update of ``kind`` (``tool_call``, ``plan``, ...) of the turn."""

        def found() -> Json | None:
            return next((u for u in self.updates if u.get("sessionUpdate") == kind), None)

        await self._until(f"a {kind} update", lambda: found() is not None, within)
        update = found()
        assert update is not None
        return update

    async def wait_for_permission(self, *, within: float = 30) -> PermissionRequest:
        """The turn's first permission request (waits for it); `TurnEnded` if the
        turn is answered first."""
        agent = self.session.agent
        found: list[PermissionRequest] = []
        with anyio.fail_after(within):
            async with anyio.create_task_group() as tg:

                async def asked() -> None:
                    with contextlib.suppress(AgentExited):
                        found.append(
                            await agent.wait_for_permission(
                                self.session.id, since=self._asks, within=within + 1
                            )
                        )
                    tg.cancel_scope.cancel()

                async def ended() -> None:
                    with contextlib.suppress(AgentExited):
                        await self.client.wait_until(lambda: self.done, within=within + 1)
                    tg.cancel_scope.cancel()

                tg.start_soon(asked)
                tg.start_soon(ended)
        if found:
            return found[0]
        if self.response is None:
            raise AgentExited("the agent exited before it asked for a permission")
        raise TurnEnded("a permission request", self.response)

    async def stop(self, *, within: float = 30, watch: float = 0) -> PromptResult:
        """Stop the turn (``session/cancel``) and return its result."""
        if not self.stop_sent:
            self.stop_sent = True
            await self.session.stop()
        return await self.result(within=within, watch=watch)

    async def disconnect(self, *, within: float = 30) -> PromptResult:
        """Close the agent's stdin mid-turn; the result has the response if the agent
        answered before it exited, else ``{}``."""
        await self.session.agent.disconnect()
        return await self.result(within=within)

    async def result(self, *, within: float = 60, watch: float = 0) -> PromptResult:
        """Wait for the response; then (``watch`` seconds later, if given) run the
        barrier and return the `PromptResult`, whose ``late`` holds the updates of
        this session that came after the response."""
        with contextlib.suppress(AgentExited):
            await self.client.wait_until(lambda: self.done, within=within)
        if watch:
            # Watching for something that must not happen: only a time window can.
            await anyio.sleep(watch)
        agent = self.session.agent
        if not self.client.stdin_closed and not self.client.eof.is_set():
            await agent.settle(within=within)
        else:
            with anyio.fail_after(within):
                await self.client.eof.wait()
        late: list[Json] = []
        if self._response_pos is not None:
            for msg in self.client.messages[self._response_pos + 1 :]:
                update = session_update(msg, self.session.id)
                if update is not None:
                    late.append(update)
        return PromptResult(self.response or {}, list(self.updates), late)
