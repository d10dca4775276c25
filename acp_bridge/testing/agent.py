"""The kit's editor: one agent process, its sessions, their turns.

`start_agent(command, workspace=...)` starts any ACP agent over stdio and
yields an `Agent`; `AgentLauncher` (the ``acp_agent`` fixture) starts
acp-bridge on a script or a provider config, or any command.  Then::

    await agent.initialize()                      # fs + terminal served from the workspace
    session = await agent.new_session()
    result = await session.prompt("hi")           # a PromptResult: response, updates, late
    result = await session.prompt("go on", stop_after=5)   # Stop after 5 chunks

    turn = await session.start_prompt("edit it")  # a Turn: wait for what you need, then
    request = await turn.wait_for_permission()    # ... the agent asked
    result = await turn.stop()                    # session/cancel, then the response

Every wait is bounded (``within``, seconds): a hung agent fails the test with
`TimeoutError`.  After each response the kit runs a barrier (`Agent.settle`),
so ``result.late`` holds every update the agent had sent for the turn after
its response (ACP says there must be none).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ..client import (
    CHUNK_KINDS,
    AcpClient,
    AgentExited,
    PromptResult,
    RequestId,
    id_key,
    is_response,
    running,
)
from .policies import (
    ElicitationPolicy,
    PermissionPolicy,
    PermissionRequest,
    decline,
    dismiss,
)
from .workspace import WorkspaceEditor

Json = dict[str, Any]

SETTLE_METHOD = "_acp_bridge/settle"
"""The barrier request of `Agent.settle`: an extension method, answered with
``-32601`` by an agent that does not know it (any answer will do)."""

STDIN_CLOSED = ("close", {"stdin": "closed"})
"""The transcript entry `Agent.disconnect` adds where it closed the agent's stdin."""

CLIENT_INFO: Json = {"name": "acp-bridge-client", "version": "1"}
"""The ``clientInfo`` the kit sends: fixed, so snapshots do not change with releases."""


class AgentError(Exception):
    """The agent answered a request with an error; ``response`` is the whole message."""

    def __init__(self, method: str, response: Json) -> None:
        super().__init__(f"{method} failed: {response.get('error')}")
        self.method = method
        self.response = response

    @property
    def code(self) -> int | None:
        error = self.response.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, int) else None


class TurnEnded(Exception):
    """The turn was answered before what the test waited for happened."""

    def __init__(self, what: str, response: Json) -> None:
        super().__init__(f"the turn ended before {what}: {response}")
        self.response = response


def client_capabilities(
    *, fs: bool = True, terminal: bool = True, elicitation: bool = False
) -> Json:
    """Client capabilities: files and terminals (served from the workspace), and
    form elicitations (answered by ``Agent.elicitations``)."""
    caps: Json = {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal}
    if elicitation:
        caps["elicitation"] = {"form": {}}
    return caps


def text_prompt(session_id: str, content: str | Sequence[Json]) -> Json:
    """The params of a ``session/prompt``: a text, or a list of content blocks."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return {"sessionId": session_id, "prompt": blocks}


def session_update(msg: Json, session_id: str) -> Json | None:
    """The ``update`` of a ``session/update`` message of ``session_id``, else None."""
    if msg.get("method") != "session/update":
        return None
    params = msg.get("params")
    if not isinstance(params, dict) or params.get("sessionId") != session_id:
        return None
    update = params.get("update")
    return update if isinstance(update, dict) else None


class Agent:
    """An agent process driven by the kit (see the module docstring).

    ``client`` is the underlying `acp_bridge.client.AcpClient` (its
    ``transcript`` has every message both ways, in wire order); ``editor``
    serves ``fs/*`` and ``terminal/*`` from ``workspace``; ``permissions`` and
    ``elicitations`` are the policies that answer the agent's questions
    (`acp_bridge.testing.policies`).  ``state_dir`` is acp-bridge's state
    folder when the kit started acp-bridge (its event logs: `logs`).
    """

    def __init__(
        self,
        client: AcpClient,
        task_group: anyio.abc.TaskGroup,
        *,
        workspace: Path,
        state_dir: Path | None = None,
        stderr_path: Path | None = None,
        tmp: Path | None = None,
    ) -> None:
        self.client = client
        self.workspace = workspace
        self.state_dir = state_dir
        self.stderr_path = stderr_path
        self.tmp = tmp
        self.editor = WorkspaceEditor(workspace)
        self.editor.install(client, task_group)
        client.handlers["session/request_permission"] = self.editor.wrap(
            "session/request_permission", self._permission
        )
        client.handlers["elicitation/create"] = self.editor.wrap(
            "elicitation/create", self._elicitation
        )
        self.permissions: PermissionPolicy = dismiss()
        self.elicitations: ElicitationPolicy = decline()
        self.permission_requests: list[PermissionRequest] = []
        self.elicitation_requests: list[Json] = []
        self.barrier_ids: set[str] = set()
        self.info: Json | None = None  # the initialize result
        self._asked = anyio.Event()
        self._barriers = count(1)

    # -- requests ------------------------------------------------------------------

    @property
    def transcript(self) -> list[tuple[str, Json]]:
        return self.client.transcript

    async def request(self, method: str, params: Json, *, within: float = 30) -> Any:
        """Send a request and return its result; `AgentError` if it is answered
        with an error."""
        response = await self.client.request(method, params, within=within)
        if "result" not in response:
            raise AgentError(method, response)
        return response["result"]

    async def initialize(
        self,
        capabilities: Json | None = None,
        *,
        fs: bool = True,
        terminal: bool = True,
        elicitation: bool = False,
        protocol_version: int = 1,
        client_info: Json | None = None,
    ) -> Json:
        """``initialize``; the client capabilities are ``capabilities`` if given, else
        built from the flags (files and terminals by default).  Returns the result."""
        if capabilities is None:
            capabilities = client_capabilities(fs=fs, terminal=terminal, elicitation=elicitation)
        result = await self.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "clientCapabilities": capabilities,
                "clientInfo": client_info or CLIENT_INFO,
            },
        )
        self.info = result
        return dict(result)

    async def new_session(
        self, cwd: str | Path | None = None, *, mcp_servers: Sequence[Json] = ()
    ) -> Session:
        """``session/new`` in ``cwd`` (default: the workspace)."""
        cwd = str(cwd or self.workspace)
        result = await self.request("session/new", {"cwd": cwd, "mcpServers": list(mcp_servers)})
        return Session(self, str(result["sessionId"]), cwd, result)

    async def load_session(
        self, session_id: str, cwd: str | Path | None = None, *, mcp_servers: Sequence[Json] = ()
    ) -> Session:
        """``session/load``; the session's ``replayed`` holds the updates that came
        before the response (the replay)."""
        return await self._reopen("session/load", session_id, cwd, mcp_servers)

    async def resume_session(
        self, session_id: str, cwd: str | Path | None = None, *, mcp_servers: Sequence[Json] = ()
    ) -> Session:
        """``session/resume`` (``replayed`` should stay empty: resume does not replay)."""
        return await self._reopen("session/resume", session_id, cwd, mcp_servers)

    async def fork_session(
        self, session_id: str, cwd: str | Path | None = None, *, mcp_servers: Sequence[Json] = ()
    ) -> Session:
        """``session/fork`` (unstable in ACP v1): a new session that starts with the
        conversation of ``session_id``."""
        cwd = str(cwd or self.workspace)
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
        result = await self.request("session/fork", params)
        return Session(self, str(result["sessionId"]), cwd, result)

    async def _reopen(
        self, method: str, session_id: str, cwd: str | Path | None, mcp_servers: Sequence[Json]
    ) -> Session:
        cwd = str(cwd or self.workspace)
        start = len(self.client.messages)
        rid = self.client.next_id()
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
        response = await self.client.request(method, params, rid=rid)
        if "result" not in response:
            raise AgentError(method, response)
        session = Session(self, session_id, cwd, response["result"])
        for msg in self.client.messages[start:]:
            if is_response(msg) and id_key(msg["id"]) == id_key(rid):
                break
            update = session_update(msg, session_id)
            if update is not None:
                session.replayed.append(update)
        return session

    async def list_sessions(self, cwd: str | Path | None = None, cursor: str | None = None) -> Json:
        """``session/list``: the result (``sessions``, ``nextCursor``)."""
        params: Json = {}
        if cwd is not None:
            params["cwd"] = str(cwd)
        if cursor is not None:
            params["cursor"] = cursor
        return dict(await self.request("session/list", params))

    # -- the barrier, the end ------------------------------------------------------

    async def settle(self, *, within: float = 30) -> None:
        """A barrier: when it returns, everything the agent wrote before the call is
        in the transcript.

        It sends a request the agent answers in order (`SETTLE_METHOD`, an
        unknown extension method: the answer is an error, which is fine) and
        waits for the answer.  These requests are left out of snapshots.
        """
        rid = f"settle-{next(self._barriers)}"
        self.barrier_ids.add(rid)
        await self.client.request(SETTLE_METHOD, {}, rid=rid, within=within)

    async def disconnect(self) -> None:
        """Close the agent's stdin, as an editor that goes away (marked in the transcript)."""
        if not self.client.stdin_closed:
            self.client.record(*STDIN_CLOSED)
            await self.client.close_stdin()

    async def finish(self, *, within: float = 60) -> int:
        """End the session as an editor does (close stdin), wait for the agent to
        exit and return its exit status."""
        return await self.client.finish(within=within)

    async def wait_exit(self, *, within: float = 60) -> int:
        """The agent's exit status once it exits (stdin left as it is)."""
        with anyio.fail_after(within):
            status = await self.client.agent.wait(within=within)
            await self.client.eof.wait()
        return status

    # -- what happened -------------------------------------------------------------

    def logs(self) -> dict[str, list[Json]]:
        """acp-bridge's event log of each session, by session id (empty for an agent
        the kit did not start as acp-bridge)."""
        from ..log.reader import read_records

        out: dict[str, list[Json]] = {}
        sessions = self.state_dir / "sessions" if self.state_dir else None
        if sessions is not None and sessions.is_dir():
            for path in sorted(sessions.glob("*.jsonl")):
                out[path.stem] = read_records(path)
        return out

    def stderr(self) -> str:
        """What the agent wrote to stderr so far."""
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        return self.stderr_path.read_text(errors="replace")

    def updates(self, session_id: str) -> list[Json]:
        """Every update of ``session_id`` received so far."""
        found = (session_update(m, session_id) for m in self.client.messages)
        return [u for u in found if u is not None]

    # -- answering the agent -------------------------------------------------------

    async def _permission(self, params: Json) -> Json:
        request = PermissionRequest(params)
        self.permission_requests.append(request)
        self._asked.set()
        self._asked = anyio.Event()
        answer = await self.permissions(request)
        request.answer = answer
        return answer

    async def _elicitation(self, params: Json) -> Json:
        self.elicitation_requests.append(params)
        return await self.elicitations(params)

    def _stopped(self, session_id: str) -> None:
        for request in self.permission_requests:
            if request.session_id == session_id and request.answer is None:
                request.stopped.set()

    async def wait_for_permission(
        self, session_id: str | None = None, *, since: int = 0, within: float = 30
    ) -> PermissionRequest:
        """The first permission request (of ``session_id``) from
        ``permission_requests[since]`` on; waits for it."""
        with anyio.fail_after(within):
            while True:
                for request in self.permission_requests[since:]:
                    if session_id is None or request.session_id == session_id:
                        return request
                if self.client.eof.is_set():
                    raise AgentExited("the agent exited before it asked for a permission")
                await _first_of(self._asked, self.client.eof)


async def _first_of(*events: anyio.Event) -> None:
    """Until one of ``events`` is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


class Session:
    """A session of an `Agent`: prompts, Stop, close."""

    def __init__(self, agent: Agent, session_id: str, cwd: str, response: Json) -> None:
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
    """A prompt sent and not yet awaited (see `Session.start_prompt`)."""

    def __init__(self, session: Session, request_id: RequestId, start: int) -> None:
        self.session = session
        self.request_id = request_id
        self.updates: list[Json] = []  # of this session, before the response
        self.response: Json | None = None
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


@asynccontextmanager
async def start_agent(
    command: Sequence[str],
    *,
    workspace: Path,
    state_dir: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    stderr: Path | None = None,
    tmp: Path | None = None,
) -> AsyncIterator[Agent]:
    """Start ``command`` (any ACP agent) on stdio and yield an `Agent` for it.

    ``workspace`` is the folder the test editor serves and the default cwd of
    sessions; ``state_dir`` is only recorded (for `Agent.logs`); ``stderr`` is
    a file for the agent's stderr (default: inherited).  On the way out the
    agent is killed if it still runs, and so are the terminals it left.
    """
    async with (
        running(command, env=env, cwd=cwd, stderr=stderr) as client,
        anyio.create_task_group() as tg,
    ):
        agent = Agent(
            client, tg, workspace=workspace, state_dir=state_dir, stderr_path=stderr, tmp=tmp
        )
        try:
            yield agent
        finally:
            agent.editor.kill_all()
            tg.cancel_scope.cancel()


__all__ = [
    "CLIENT_INFO",
    "SETTLE_METHOD",
    "STDIN_CLOSED",
    "Agent",
    "AgentError",
    "Session",
    "Turn",
    "TurnEnded",
    "client_capabilities",
    "session_update",
    "start_agent",
    "text_prompt",
]
