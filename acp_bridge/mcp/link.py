"""One connection to one MCP server, for as long as its session is open.

`ServerLink.run` is the connection's own task (the ``mcp`` client's context
managers must be entered and left in one task): it starts the transport,
runs ``initialize``, lists the tools (every page), and then serves calls
made from the session's turns until `close` or until the server goes away.
``notifications/tools/list_changed`` lists the tools again.

A stdio server is started by the bridge's own handshake
(`acp_bridge.mcp.handshake`): the link is ``ready`` with the server's tools
before the ``mcp`` package is imported; the import follows, and the ``mcp``
client takes the connection over.  A call made meanwhile waits for it.
HTTP and SSE servers go through the ``mcp`` client from the start.

States: ``starting`` → ``ready`` → ``closed``, or ``failed`` (it could not
start, or it died).  ``on_change(link)`` is called on every change of state
or of the tool list.

A call cancelled by a Stop: the ``mcp`` client (2.x) sends
``notifications/cancelled`` with the call's request id itself, shielded from
the cancellation and bounded, before the cancellation goes on; nothing else
is sent for that call.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.to_thread

from ..json_depth import MAX_DEPTH, too_deep
from .handshake import MAX_PAGES
from .specs import ServerSpec

__all__ = ["RemoteTool", "ServerLink", "import_client"]

log = logging.getLogger("acp_bridge.mcp")

# How long a call that changed the tools waits for them to be listed again.
RELIST_BOUND: Final = 5.0


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it (JSON fields)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None


class CallFailed(Exception):
    """The call could not be made or got no result (the message says why)."""


def import_client() -> None:
    """Load the ``mcp`` client (a second or two of CPU): run in a worker thread."""
    import mcp.client.session
    import mcp.client.sse
    import mcp.client.streamable_http  # noqa: F401


async def ensure_client() -> None:
    """`import_client` in a worker thread.  A connection closed meanwhile does
    not wait for the import; one that asks next waits on the same modules'
    import locks, and once they are loaded an import finds them at once."""
    await anyio.to_thread.run_sync(import_client, abandon_on_cancel=True)


@dataclass(eq=False)
class ServerLink:
    spec: ServerSpec
    cwd: str
    on_change: Callable[[ServerLink], None]
    state: str = "starting"
    error: str | None = None
    tools: list[RemoteTool] = field(default_factory=list)
    # Tools of the last listing left out (their input schema nests too deep).
    left_out: list[str] = field(default_factory=list)
    # Set once the server is ready or failed (session/new waits on it, bounded).
    settled: anyio.Event = field(default_factory=anyio.Event)
    # Set when run() has returned (the process is stopped).
    done: anyio.Event = field(default_factory=anyio.Event)
    _stop: anyio.Event = field(default_factory=anyio.Event)
    _gone: anyio.Event = field(default_factory=anyio.Event)
    _session: Any = None
    _relist: anyio.Event = field(default_factory=anyio.Event)
    # tools/list_changed notifications seen, and how many of them a listing covers.
    _changes_seen: int = 0
    _changes_listed: int = 0
    _listed: anyio.Event = field(default_factory=anyio.Event)
    # The child's exit status, for a stdio server.
    _exit_status: Callable[[], int | None] | None = None
    # A stdio server's pipes (`acp_bridge.mcp.stdio.Pipes`).
    _pipes: Any = None
    # Set once the mcp client has the connection (or the connection is over).
    _handed: anyio.Event = field(default_factory=anyio.Event)

    # -- from other tasks --------------------------------------------------------

    def close(self) -> None:
        self._stop.set()

    async def call(self, name: str, arguments: dict[str, Any], on_progress: Any = None) -> Any:
        """``tools/call``: the result as JSON (raises CallFailed, or the cancellation)."""
        if self.state == "ready" and self._session is None:
            await self._handed.wait()  # the mcp package is still loading
        session = self._session
        if self.state != "ready" or session is None:
            raise CallFailed(f"the MCP server {self.spec.name!r} is not connected ({self.state})")
        from mcp.shared.exceptions import MCPError

        try:
            result = await session.call_tool(name, arguments, progress_callback=on_progress)
        except MCPError as exc:
            if self._gone.is_set():
                # The server died: its failure is known (and told) before this call ends.
                with anyio.move_on_after(1.0):
                    await self.done.wait()
            if self._gone.is_set() or self.state != "ready":
                raise CallFailed(
                    f"the MCP server {self.spec.name!r} stopped during the call"
                    + (f" ({self.error})" if self.error else "")
                ) from None
            raise CallFailed(f"the MCP server answered an error: {exc}") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise CallFailed(f"the MCP server {self.spec.name!r} stopped during the call") from None
        except Exception as exc:  # a result the client refused (schema, shape)
            raise CallFailed(f"the MCP server's answer was not usable: {_describe(exc)}") from None
        await self._caught_up()
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _caught_up(self) -> None:
        """A call that changed the server's tools (it said so before answering)
        returns once they are listed again, so the next model request has them."""
        target = self._changes_seen
        with anyio.move_on_after(RELIST_BOUND):
            while self._changes_listed < target and self.state == "ready":
                await self._listed.wait()

    # -- the connection's task ---------------------------------------------------

    def _set(self, state: str, error: str | None = None) -> None:
        if self.state in ("failed", "closed") or (state == self.state == "ready"):
            return
        self.state, self.error = state, error
        if state != "starting":
            self.settled.set()
        self.on_change(self)

    async def run(self) -> None:
        try:
            await self._run()
        except Exception as exc:  # any failure of the server or its transport
            why = _describe(exc)
            log.debug("MCP server %s failed", self.spec.name, exc_info=True)
            self._set("failed", why)
        finally:
            self._session = None
            self._handed.set()
            if self.state not in ("failed", "closed"):
                self._set("closed" if self._stop.is_set() else "failed", self.error or "it exited")
            self.settled.set()
            self.done.set()

    async def _run(self) -> None:
        spec = self.spec
        async with contextlib.AsyncExitStack() as stack:
            pipes: Any = None
            if spec.transport == "stdio":
                from . import stdio
                from .handshake import Handshake

                try:
                    process = await stdio.spawn(spec, self.cwd)
                except OSError as exc:
                    why = exc.strerror or exc
                    raise CallFailed(f"cannot start {spec.command}: {why}") from None
                shake = Handshake(self._send_raw, self._list_changed)
                pipes = await stack.enter_async_context(
                    stdio.connect(process, spec.name, shake.received, self._gone.set)
                )
                self._pipes = pipes
                self._exit_status = lambda: process.returncode
            else:
                await ensure_client()
                read, write = await stack.enter_async_context(self._http())
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch, tg.cancel_scope)
                if pipes is not None:
                    # The bridge's own handshake: session/new is answered without
                    # waiting for the mcp package, which loads only now, once the
                    # server has started (they would compete for the CPU).
                    initialized = await shake.initialize(self._client_info())
                    self.left_out = []
                    self.tools = _admit(spec.name, await shake.list_tools(), self.left_out)
                    self._set("ready")
                    await ensure_client()
                    read, write = pipes.hand_over()
                async with self._client(read, write) as session:
                    if pipes is None:
                        await session.initialize()
                        self.tools = await self._list(session)
                    else:
                        from mcp_types import InitializeResult

                        session.adopt(InitializeResult.model_validate(initialized))
                    self._session = session
                    self._handed.set()
                    self._set("ready")
                    while True:
                        await self._relist.wait()
                        self._relist = anyio.Event()
                        covered = self._changes_seen
                        self.tools = await self._list(session)
                        self._changes_listed = covered
                        self._listed.set()
                        self._listed = anyio.Event()
                        self.on_change(self)

    def _send_raw(self, frame: bytes) -> None:
        if self._pipes is not None:
            self._pipes.send(frame)

    def _list_changed(self) -> None:
        self._changes_seen += 1
        self._relist.set()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        """End the connection on close() or when the server goes away."""
        async with anyio.create_task_group() as tg:

            async def wait(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(wait, self._stop)
            tg.start_soon(wait, self._gone)
        if self._stop.is_set():
            self._set("closed")
        elif self._pipes is not None and self._pipes.broken is not None:
            self._set("failed", self._pipes.broken)
        else:
            exit_status = self._exit_status
            status = None if exit_status is None else exit_status()
            with anyio.move_on_after(0.5):  # the exit status, if it comes
                while status is None and exit_status is not None:
                    await anyio.sleep(0.01)
                    status = exit_status()
            how = f"it exited with status {status}" if status is not None else "it closed"
            self._set("failed", how if status is not None else f"{how} its connection")
        scope.cancel()

    @staticmethod
    def _client_info() -> dict[str, Any]:
        from .. import __version__

        return {"name": "acp-bridge", "version": __version__}

    def _client(self, read: Any, write: Any) -> Any:
        from mcp.client.session import ClientSession
        from mcp_types import Implementation

        async def on_message(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                self._list_changed()

        return ClientSession(
            read,
            write,
            message_handler=on_message,
            client_info=Implementation(**self._client_info()),
        )

    def _http(self) -> Any:
        spec = self.spec
        headers = dict(spec.headers)
        if spec.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(spec.url, headers=headers)
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        @contextlib.asynccontextmanager
        async def connect() -> Any:
            async with (
                create_mcp_http_client(headers=headers) as client,
                streamable_http_client(spec.url, http_client=client) as (read, write),
            ):
                yield read, write

        return connect()

    async def _list(self, session: Any) -> list[RemoteTool]:
        from mcp_types import PaginatedRequestParams

        tools: list[RemoteTool] = []
        left_out: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=params)
            dumped = [
                t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools
            ]
            tools += _admit(self.spec.name, dumped, left_out)
            cursor = page.next_cursor
            if not cursor:
                break
        self.left_out = left_out
        return tools


def _admit(server: str, listed: list[dict[str, Any]], left_out: list[str]) -> list[RemoteTool]:
    """The tools of a ``tools/list`` answer the bridge can offer: one whose
    input schema nests deeper than `MAX_DEPTH` levels is left out (the schema
    goes into every model request and the log, which could not encode it),
    its name added to ``left_out`` (the user is told: `SessionServers`) and said
    on stderr."""
    tools: list[RemoteTool] = []
    for data in listed:
        tool = _remote(data)
        if too_deep(tool.input_schema, MAX_DEPTH) is not None:
            log.warning(
                "MCP server %s: tool %r left out: its input schema nests deeper than %d levels",
                server,
                tool.name[:100],
                MAX_DEPTH,
            )
            left_out.append(tool.name[:100])
            continue
        tools.append(tool)
    return tools


def _remote(data: dict[str, Any]) -> RemoteTool:
    """A tool of a ``tools/list`` answer (its JSON object)."""
    schema = data.get("inputSchema")
    annotations = data.get("annotations")
    return RemoteTool(
        name=str(data.get("name")),
        description=str(data.get("description") or data.get("title") or ""),
        input_schema=schema if isinstance(schema, dict) else {"type": "object"},
        annotations=annotations if isinstance(annotations, dict) else None,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if inner:
            return _describe(inner[0])
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
