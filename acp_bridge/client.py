"""An ACP editor in a box: drives an agent over a pair of byte streams.

`AcpClient` is the one editor that ``acp-bridge demo`` and the test suite use
(and the kit for testing other ACP agents).  It speaks JSON-RPC over
newline-delimited frames on any pair of streams (a subprocess's pipes, raw
file descriptors, in-memory streams), and:

* keeps a transcript of every message in both directions, in wire order, so
  a test can assert on exactly what an editor would have seen;
* indexes responses by id (a reused id may be answered more than once, so
  each id maps to a list) and keeps every line that is not JSON-RPC;
* answers the agent's own requests (``fs/read_text_file``,
  ``terminal/create``, ``session/request_permission``, ...) from `handlers`,
  a table tests fill in; a method with no handler gets ``-32601``, and a
  ``$/cancel_request`` from the agent cancels the handler (``-32800``);
* can send any bytes at all, for bad-input tests.

Typical use::

    async with running(bridge_command("--provider", "fake", "--script", path)) as client:
        await client.initialize()
        session_id = await client.new_session(str(project))
        result = await client.prompt(session_id, "hi", cancel_after=3)
        assert await client.finish() == 0

`spawn` runs the agent on raw pipes (`acp_bridge.agent_process`, whose
names are importable from here too): a test can stop reading its stdout
(``client.process.stdout.pause()``), send it signals, give it a umask, an
environment, or a stderr nobody reads; every wait is bounded (``within``).

One class, the editor, is most of this module (about 360 lines): its
reading, writing, waiting and serving share its transcript and its tables,
so they stay together.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import IO, Any, Protocol

import anyio
import anyio.abc
import orjson

from .agent_process import AgentProcess, FdSink, FdSource, bridge_command, open_agent
from .jsonrpc.errors import RemoteError, RpcError
from .jsonrpc.framing import LineFramer

Json = dict[str, Any]
RequestId = int | str

EditorHandler = Callable[[Json], Awaitable[Any]]
"""Answers one agent-to-editor request: gets its params, returns its result,
or raises `RemoteError` to answer with that error."""

CHUNK_KINDS = frozenset({"agent_message_chunk", "agent_thought_chunk"})

BARRIER_METHOD = "_acp_bridge_client/barrier"
"""The request of `AcpClient.barrier`: an extension method nobody implements,
answered "method not found" in its turn, after everything written before."""


class AgentExited(Exception):
    """The agent closed its stdout while a request was waiting for its answer."""


class ByteSink(Protocol):
    """Where the client writes (the agent's stdin)."""

    async def send(self, data: bytes, /) -> None: ...

    async def aclose(self) -> None: ...


class AgentPipes(Protocol):
    """The two ends of an agent the client needs; an `anyio.abc.Process` has them."""

    @property
    def stdin(self) -> Any: ...

    @property
    def stdout(self) -> Any: ...


@dataclass
class Pipes:
    """An `AgentPipes` from any sink and source of bytes."""

    stdin: ByteSink
    stdout: AsyncIterable[bytes]


def id_key(value: object) -> bytes:
    """A dict key for a JSON-RPC id that keeps ``1`` and ``"1"`` apart."""
    return orjson.dumps(value)


def is_response(msg: Json) -> bool:
    return "method" not in msg and "id" in msg


@dataclass
class PromptResult:
    response: Json
    updates: list[Json]
    # Updates that arrived after the response (must stay empty: invariant I1).
    late: list[Json] = field(default_factory=list)

    @property
    def stop_reason(self) -> str | None:
        """The prompt response's stop reason; in ACP v2 the turn's end is an idle
        ``state_update`` (`acp_bridge.testing.session.Turn`), and it is that one's."""
        result = self.response.get("result")
        if self.response.get("method") == "session/update":
            params = self.response.get("params")
            result = params.get("update") if isinstance(params, dict) else None
        return result.get("stopReason") if isinstance(result, dict) else None

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"]["text"]
            for u in self.updates
            if u.get("sessionUpdate") == kind and u["content"].get("type") == "text"
        )


class AcpClient:
    """An ACP editor on the agent's stdin and stdout (see the module docstring).

    ``keep=False`` keeps no transcript and no message list (for long load
    runs); responses are still indexed, hooks still see every message.
    """

    def __init__(self, process: AgentPipes, *, keep: bool = True) -> None:
        self.process = process
        self.keep = keep
        # ("send" | "recv", message) in wire order; ("send-raw", {"bytes": ...})
        # for bytes written with `send_raw`.
        self.transcript: list[tuple[str, Json]] = []
        # When each transcript entry was made (``time.monotonic()``), index for index.
        self.times: list[float] = []
        self.messages: list[Json] = []  # every JSON-RPC message received
        self.updates: list[Json] = []  # the ``update`` of every session/update
        self.responses: dict[bytes, list[Json]] = {}  # by `id_key`
        self.bad_lines: list[bytes] = []  # output lines that are not JSON-RPC
        # Agent-to-editor requests, by method.  Fill it in before they arrive.
        self.handlers: dict[str, EditorHandler] = {}
        self.on_message: Callable[[Json], None] | None = None
        self.eof = anyio.Event()
        self.stdin_closed = False
        # A write the agent does not take within this many seconds raises
        # `TimeoutError`: an agent that stopped reading fails the test, never hangs it.
        self.write_within = 60.0
        self._on_update: Callable[[Json], None] | None = None
        self._framer = LineFramer()
        self._ids = count(1)
        self._barriers = count(1)
        self._waiters: dict[bytes, anyio.Event] = {}
        self._changed = anyio.Event()
        self._write_lock = anyio.Lock()
        self._serving: dict[bytes, anyio.CancelScope] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    @classmethod
    def over(cls, stdin: ByteSink, stdout: AsyncIterable[bytes], *, keep: bool = True) -> AcpClient:
        """A client on any pair of streams (raw descriptors, in-memory streams)."""
        return cls(Pipes(stdin, stdout), keep=keep)

    @property
    def agent(self) -> AgentProcess:
        """The agent started by `spawn` or `running`: ``pid``, ``send_signal``,
        ``wait``, and its stdout, which ``agent.stdout.pause()`` stops reading."""
        if not isinstance(self.process, AgentProcess):
            raise TypeError("this client was not built by spawn() or running()")
        return self.process

    # -- writing -------------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        """Write ``data`` as it is (it need not be JSON, nor end with a newline)."""
        if self.keep:
            self.record("send-raw", {"bytes": data.decode("utf-8", "replace")})
        await self._write(data)

    async def send(self, *messages: Json) -> None:
        """Send messages, in one write."""
        if self.keep:
            for m in messages:
                self.record("send", m)
        await self._write(b"".join(orjson.dumps(m) + b"\n" for m in messages))

    async def _write(self, data: bytes) -> None:
        with anyio.fail_after(self.write_within):
            async with self._write_lock:
                await self.process.stdin.send(data)

    def record(self, direction: str, entry: Json) -> None:
        """Add an entry to the transcript (and its time to `times`): the client
        does it for every message; a test adds its own marks (a closed stdin)."""
        self.transcript.append((direction, entry))
        self.times.append(time.monotonic())

    def next_id(self) -> int:
        return next(self._ids)

    async def request(
        self, method: str, params: Json, *, rid: RequestId | None = None, within: float = 30
    ) -> Json:
        """Send a request and return its response message (result or error).

        Raises `AgentExited` if the agent closes its stdout first and
        `TimeoutError` after ``within`` seconds.
        """
        rid = self.next_id() if rid is None else rid
        nth = len(self.responses.get(id_key(rid), ())) + 1
        await self.send_request(method, params, rid=rid)
        try:
            return await self.wait_response(rid, nth=nth, within=within)
        except TimeoutError:
            raise TimeoutError(f"no answer to {method} (id {rid!r}) within {within:g} s") from None

    async def send_request(
        self, method: str, params: Json, *, rid: RequestId | None = None
    ) -> RequestId:
        """Send a request without waiting; its id, for `wait_response`."""
        rid = self.next_id() if rid is None else rid
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    async def notify(self, method: str, params: Json) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def close_stdin(self) -> None:
        """Close the agent's stdin (an editor that goes away)."""
        if not self.stdin_closed:
            self.stdin_closed = True
            async with self._write_lock:
                await self.process.stdin.aclose()

    # -- reading -------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Read the agent's stdout to EOF, then set `eof` (and wake every waiter).

        Agent-to-editor requests are answered in tasks of this loop.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    async for data in self.process.stdout:
                        for frame in self._framer.feed(data):
                            if isinstance(frame, bytes):
                                self._line(frame)
                            else:
                                self.bad_lines.append(b"<frame too large>")
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                tg.cancel_scope.cancel()  # the agent is gone: nobody reads our answers
        finally:
            self._tg = None
            if self._framer.pending():
                self.bad_lines.append(b"<unterminated>")
            self.eof.set()
            self._changed.set()
            for event in self._waiters.values():
                event.set()

    def _line(self, line: bytes) -> None:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.bad_lines.append(line[:500])
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self.bad_lines.append(line[:500])
            return
        if self.keep:
            self.record("recv", msg)
            self.messages.append(msg)
        method = msg.get("method")
        if method == "session/update":
            params = msg.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            if isinstance(update, dict):
                if self.keep:
                    self.updates.append(update)
                if self._on_update is not None:
                    self._on_update(update)
        elif isinstance(method, str) and "id" in msg:
            self._serve(msg)
        elif method == "$/cancel_request":
            self._cancel_served(msg.get("params"))
        elif is_response(msg):
            key = id_key(msg["id"])
            self.responses.setdefault(key, []).append(msg)
            waiter = self._waiters.pop(key, None)
            if waiter is not None:
                waiter.set()
        if self.on_message is not None:
            self.on_message(msg)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_response(self, rid: object, *, nth: int = 1, within: float = 30) -> Json:
        """The ``nth`` response with id ``rid`` (waits for it)."""
        key = id_key(rid)
        try:
            with anyio.fail_after(within):
                while len(self.responses.get(key, ())) < nth:
                    if self.eof.is_set():
                        raise AgentExited(
                            f"the agent closed its stdout before answering id {rid!r}"
                        )
                    waiter = self._waiters.setdefault(key, anyio.Event())
                    await waiter.wait()
        except TimeoutError:
            raise TimeoutError(f"no answer to id {rid!r} within {within:g} s") from None
        return self.responses[key][nth - 1]

    async def wait_for(
        self, pred: Callable[[Json], bool], start: int = 0, within: float = 30
    ) -> Json:
        """The first received message from ``messages[start]`` on that satisfies ``pred``."""
        with anyio.fail_after(within):
            while True:
                for msg in self.messages[start:]:
                    if pred(msg):
                        return msg
                if self.eof.is_set():
                    raise AgentExited("the agent closed its stdout while we waited")
                await self._changed.wait()

    async def wait_until(self, condition: Callable[[], bool], *, within: float = 30) -> None:
        """Until ``condition()`` holds, checked after every message received.

        Raises `AgentExited` if the agent closes its stdout first and
        `TimeoutError` after ``within`` seconds (a hang fails, never freezes).
        """
        with anyio.fail_after(within):
            while not condition():
                if self.eof.is_set():
                    raise AgentExited("the agent closed its stdout while we waited")
                await self._changed.wait()

    async def finish(self, *, within: float = 60) -> int:
        """End the agent as an editor does: close its stdin, read its stdout
        to EOF and return its exit status (an agent started by `spawn`)."""
        await self.close_stdin()
        with anyio.fail_after(within):
            status = await self.agent.wait()
            await self.eof.wait()
        return status

    async def barrier(
        self, *, within: float = 30, method: str = BARRIER_METHOD, keep: bool = False
    ) -> str | None:
        """Return once the agent has answered a cheap request sent now.

        An agent answers in order, so everything it wrote before it read this
        request has been received when this returns: to see that something
        did NOT happen (no late update, no second response), look after a
        barrier, not after a sleep.  The request (`BARRIER_METHOD`, an
        extension method nobody implements: its answer is an error, which is
        fine) and its answer are left out of `transcript`, `times`,
        `messages` and `responses`.  An agent that has gone needs no
        barrier: its output is whole at EOF.

        ``method`` names the request instead; with ``keep`` the request and its
        answer stay in the records (the test kit's `settle` leaves them out of
        snapshots by their id).  Returns the request's id, or None when the
        agent had gone and none was sent.
        """
        if not self.eof.is_set() and self.stdin_closed:
            with anyio.fail_after(within):
                await self.eof.wait()
        if self.eof.is_set():
            return None
        rid = f"{'settle' if keep else 'barrier'}-{next(self._barriers)}"
        start = len(self.transcript)
        try:
            await self.request(method, {}, rid=rid, within=within)
        except (AgentExited, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            with anyio.fail_after(within):
                await self.eof.wait()
        if keep:
            return rid
        self.responses.pop(id_key(rid), None)
        self.messages[:] = [m for m in self.messages if m.get("id") != rid]
        kept = [
            i
            for i in range(len(self.transcript))
            if i < start or self.transcript[i][1].get("id") != rid
        ]
        self.transcript[:] = [self.transcript[i] for i in kept]
        self.times[:] = [self.times[i] for i in kept]
        return rid

    async def exchange(self, frame: bytes, *, within: float = 10) -> list[Json]:
        """Send raw ``frame`` and then a ping (``initialize``); return what came
        back before the ping's answer, ``session/update`` notifications left out.

        The agent answers in order, so this is everything ``frame`` caused
        right away, without waiting for a quiet period.
        """
        ping = f"ping{self.next_id()}"
        start = len(self.messages)
        ping_frame = {
            "jsonrpc": "2.0",
            "id": ping,
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        await self.send_raw(frame + b"\n" + orjson.dumps(ping_frame) + b"\n")
        pong = await self.wait_response(ping, within=within)
        assert "result" in pong, f"the ping after {frame[:200]!r} failed: {pong}"
        end = self.messages.index(pong, start)
        return [m for m in self.messages[start:end] if m.get("method") != "session/update"]

    # -- answering the agent -------------------------------------------------------

    def _serve(self, msg: Json) -> None:
        rid = msg["id"]
        handler = self.handlers.get(msg["method"])
        assert self._tg is not None, "only called from read_loop"
        if handler is None:
            error = RpcError.method_not_found(msg["method"]).to_wire()
            self._tg.start_soon(self.send, {"jsonrpc": "2.0", "id": rid, "error": error})
            return
        scope = anyio.CancelScope()
        self._serving[id_key(rid)] = scope
        params = msg.get("params")
        self._tg.start_soon(self._run_handler, rid, handler, params or {}, scope)

    async def _run_handler(
        self, rid: RequestId, handler: EditorHandler, params: Json, scope: anyio.CancelScope
    ) -> None:
        answer: Json
        with scope:
            try:
                answer = {"result": await handler(params)}
            except RemoteError as exc:
                answer = {"error": RpcError(exc.code, exc.message, exc.data).to_wire()}
            except Exception as exc:
                answer = {"error": RpcError.internal(f"{type(exc).__name__}: {exc}").to_wire()}
        self._serving.pop(id_key(rid), None)
        if scope.cancelled_caught:
            answer = {"error": RpcError.cancelled().to_wire()}
        # The editor side may have closed the agent's stdin while this request
        # was being answered: then there is no one left to answer.
        with contextlib.suppress(anyio.ClosedResourceError):
            await self.send({"jsonrpc": "2.0", "id": rid, **answer})

    def _cancel_served(self, params: object) -> None:
        if isinstance(params, dict) and "requestId" in params:
            scope = self._serving.get(id_key(params["requestId"]))
            if scope is not None:
                scope.cancel()

    # -- ACP -----------------------------------------------------------------------

    async def initialize(self, capabilities: Json | None = None) -> Json:
        """``initialize`` with protocol version 1; ``capabilities`` defaults to none."""
        if capabilities is None:
            capabilities = {"fs": {"readTextFile": False, "writeTextFile": False}}
        return await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": capabilities,
                "clientInfo": {"name": "acp-bridge-client", "version": "1"},
            },
        )

    async def new_session(self, cwd: str | None = None) -> str:
        resp = await self.request("session/new", {"cwd": cwd or os.getcwd(), "mcpServers": []})
        assert "result" in resp, f"session/new failed: {resp}"
        return str(resp["result"]["sessionId"])

    async def prompt(
        self,
        session_id: str,
        text: str,
        *,
        cancel_after: int | None = None,
        on_update: Callable[[Json], None] | None = None,
        settle: bool | float = True,
        cancel_when_quiet: float | None = None,
    ) -> PromptResult:
        """Send a prompt; optionally send session/cancel after N message chunks
        (or, with ``cancel_when_quiet``, as soon as no chunk has arrived for
        that many seconds since the last one, for a stream that ends its output
        before N; the wait for the first chunk is not counted).

        After the response, unless ``settle`` is false, runs a `barrier` and
        reports in ``late`` the updates that arrived after the response and
        before the barrier's answer (there must be none).
        """
        start = len(self.updates)
        chunks = 0
        cancel_now = anyio.Event()

        def seen(update: Json) -> None:
            nonlocal chunks
            if update.get("sessionUpdate") in CHUNK_KINDS:
                chunks += 1
                if cancel_after is not None and chunks == cancel_after:
                    cancel_now.set()
            if on_update is not None:
                on_update(update)

        self._on_update = seen
        result: Json = {}

        async def run_prompt() -> None:
            result.update(await self.request("session/prompt", prompt_params(session_id, text)))
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_prompt)
            if cancel_after is not None:
                if cancel_when_quiet is None:
                    await cancel_now.wait()
                else:
                    while not cancel_now.is_set():
                        seen_before = chunks
                        with anyio.move_on_after(cancel_when_quiet):
                            await cancel_now.wait()
                        if chunks == seen_before and chunks:  # quiet after its start
                            break
                await self.notify("session/cancel", {"sessionId": session_id})
            await anyio.sleep_forever()
        end = len(self.updates)
        if settle:
            await self.barrier()
        self._on_update = None
        return PromptResult(result, self.updates[start:end], self.updates[end:])


async def spawn(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    umask: int = -1,
    paused: bool = False,
    keep: bool = True,
    cwd: str | Path | None = None,
) -> AcpClient:
    """Start ``command`` and return a client on its stdin and stdout.

    The pipes are raw descriptors (`FdSink`, `FdSource`): nothing buffers
    the agent's output ahead of the client, so ``client.process.stdout.pause()``
    really stops reading it.  ``stderr`` is a `Path` (the file is created or
    truncated), or is passed to the process as it is: an open file,
    ``subprocess.DEVNULL``, a descriptor such as the write end of an
    ``os.pipe()`` that nobody reads (close your copy after the call); ``None``
    inherits ours.  ``umask`` is set in the child before it runs (``-1``:
    unchanged).  With ``paused``, stdout is not read until
    ``client.process.stdout.resume()``.  ``cwd`` is the agent's working
    directory (default: ours).  `AcpClient.process` is the `AgentProcess`
    (``pid``, ``send_signal``, ``wait``).
    """
    agent = await open_agent(command, env=env, stderr=stderr, umask=umask, paused=paused, cwd=cwd)
    return AcpClient(agent, keep=keep)


@asynccontextmanager
async def running(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    umask: int = -1,
    paused: bool = False,
    keep: bool = True,
    cwd: str | Path | None = None,
) -> AsyncIterator[AcpClient]:
    """`spawn` the agent and run the client's `read_loop` for the body.

    On the way out (the body ended or failed) the agent is killed if it still
    runs and the pipes are closed; use `AcpClient.finish` in the body to end
    it as an editor does and get its exit status.
    """
    agent = await open_agent(command, env=env, stderr=stderr, umask=umask, paused=paused, cwd=cwd)
    async with attached(agent, keep=keep) as client:
        yield client


@asynccontextmanager
async def attached(agent: AgentProcess, *, keep: bool = True) -> AsyncIterator[AcpClient]:
    """A client on an agent that already runs (`open_agent`, or a process started
    another way on the same kind of pipes), its `read_loop` running for the body;
    on the way out the agent is killed if it still runs and the pipes closed."""
    client = AcpClient(agent, keep=keep)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.read_loop)
            yield client
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await agent.aclose()


def prompt_params(session_id: str, text: str) -> Json:
    """The params of a ``session/prompt`` of one text block."""
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


__all__ = [
    "BARRIER_METHOD",
    "AcpClient",
    "AgentExited",
    "AgentPipes",
    "AgentProcess",
    "ByteSink",
    "EditorHandler",
    "FdSink",
    "FdSource",
    "Pipes",
    "PromptResult",
    "RemoteError",
    "RequestId",
    "attached",
    "bridge_command",
    "id_key",
    "is_response",
    "open_agent",
    "prompt_params",
    "running",
    "spawn",
]
