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

An ACP v2 agent is driven the same way after ``initialize(protocol_version=2)``:
``session/prompt`` is answered at once (``turn.accepted``, with the user
message's ``messageId``) and the turn ends with an ``idle`` ``state_update``,
which is the turn's ``response`` (``result.stop_reason`` reads it); a Stop is
confirmed by ``idle`` with ``cancelled``; ``resume_session(id, replay_from={"type":
"start"})`` replays.

Every wait is bounded (``within``, seconds): a hung agent fails the test with
`TimeoutError`.  After each response the kit runs a barrier (`Agent.settle`),
so ``result.late`` holds every update the agent had sent for the turn after
its response (ACP says there must be none).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc

from ..client import (
    AcpClient,
    AgentExited,
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
from .session import Session, Turn, TurnEnded, session_update, text_prompt
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


def client_capabilities(
    *, fs: bool = True, terminal: bool = True, elicitation: bool = False
) -> Json:
    """Client capabilities: files and terminals (served from the workspace), and
    form elicitations (answered by ``Agent.elicitations``)."""
    caps: Json = {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal}
    if elicitation:
        caps["elicitation"] = {"form": {}}
    return caps


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
        self.protocol = 1
        """The ACP version the connection speaks (2 once ``initialize`` agreed on it):
        how a turn ends (`acp_bridge.testing.session.Turn`)."""
        self._asked = anyio.Event()

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
        built from the flags (files and terminals by default).  Returns the result.

        With ``protocol_version=2`` it sends v2's shape (``info``, ``capabilities``:
        ``capabilities`` if given, else none; v2 has no editor files or terminals,
        only form elicitation); the kit speaks v2 from then on if the agent answers 2."""
        if protocol_version == 2:
            if capabilities is None:
                capabilities = {"elicitation": {"form": {}}} if elicitation else {}
            params = {
                "protocolVersion": 2,
                "info": client_info or CLIENT_INFO,
                "capabilities": capabilities,
            }
        else:
            if capabilities is None:
                capabilities = client_capabilities(
                    fs=fs, terminal=terminal, elicitation=elicitation
                )
            params = {
                "protocolVersion": protocol_version,
                "clientCapabilities": capabilities,
                "clientInfo": client_info or CLIENT_INFO,
            }
        result = await self.request("initialize", params)
        self.info = result
        self.protocol = 2 if result.get("protocolVersion") == 2 else 1
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
        self,
        session_id: str,
        cwd: str | Path | None = None,
        *,
        mcp_servers: Sequence[Json] = (),
        replay_from: Json | None = None,
    ) -> Session:
        """``session/resume`` (``replayed`` should stay empty: resume does not replay);
        in v2, ``replay_from`` (``{"type": "start"}``) asks for the replay, which
        ``replayed`` then holds."""
        extra = {} if replay_from is None else {"replayFrom": replay_from}
        return await self._reopen("session/resume", session_id, cwd, mcp_servers, extra)

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
        self,
        method: str,
        session_id: str,
        cwd: str | Path | None,
        mcp_servers: Sequence[Json],
        extra: Json | None = None,
    ) -> Session:
        cwd = str(cwd or self.workspace)
        start = len(self.client.messages)
        rid = self.client.next_id()
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": list(mcp_servers)}
        params.update(extra or {})
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
        waits for the answer (`AcpClient.barrier`; an agent that has exited needs
        none).  These requests are left out of snapshots.
        """
        rid = await self.client.barrier(within=within, method=SETTLE_METHOD, keep=True)
        if rid is not None:
            self.barrier_ids.add(rid)

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


class Runner(Protocol):
    """How `start_agent` starts a command: `acp_bridge.client.running`'s signature."""

    def __call__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = ...,
        cwd: str | Path | None = ...,
        stderr: Path | None = ...,
    ) -> AbstractAsyncContextManager[AcpClient]: ...


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
    runner: Runner | None = None,
) -> AsyncIterator[Agent]:
    """Start ``command`` (any ACP agent) on stdio and yield an `Agent` for it.

    ``workspace`` is the folder the test editor serves and the default cwd of
    sessions; ``state_dir`` is only recorded (for `Agent.logs`); ``stderr`` is
    a file for the agent's stderr (default: inherited).  ``runner`` starts the
    process and yields the client on it (default: `acp_bridge.client.running`;
    a suite can start its agents another way, forked from a process that
    imported them once, say).  On the way out the agent is killed if it still
    runs, and so are the terminals it left.
    """
    run = runner or running
    async with (
        run(command, env=env, cwd=cwd, stderr=stderr) as client,
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
    "Runner",
    "Session",
    "Turn",
    "TurnEnded",
    "client_capabilities",
    "session_update",
    "start_agent",
    "text_prompt",
]
