"""The stdio transport: an MCP server as a child process.

`spawn` starts the child (it needs nothing of the ``mcp`` package); `connect`
then carries JSON-RPC over its pipes: first for the bridge's own handshake
(`acp_bridge.mcp.handshake`), then, handed over, for an ``mcp``
``ClientSession`` (`Pipes`).

* environment: the variables the editor gave for the server, over a small
  base (``PATH``, ``HOME``, the user's name, shell, terminal and locale):
  nothing else of the bridge's environment, so none of its keys;
* the child runs in its own process group; it is stopped by closing its
  stdin (EOF), then SIGTERM to its group, then SIGKILL, each after a grace
  period, then the same to what is left of its family (what it started that
  left the group, found through ``/proc``: `acp_bridge.mcp.family`); every
  child still alive when the bridge exits is killed with its family
  (`kill_all`);
* its stderr goes to the bridge's stderr log, line by line under the
  server's name, bounded (`STDERR_BUDGET` bytes per server, then one line
  saying the rest is dropped; the pipe is still drained);
* what waits to be written to its stdin is bounded (`QUEUE_LIMIT` bytes): a
  server that does not read (and keeps sending requests the bridge answers,
  pings) is disconnected, its link failing with the reason (`Pipes.broken`);
* its stdout is cut into lines by the JSON-RPC framer
  (`acp_bridge.jsonrpc.framing.LineFramer`); a message over `MAX_MESSAGE`
  bytes ends the connection; a line that is not a valid JSON-RPC message but
  answers a request (it has its id) answers it with an error at once, so the
  call does not wait for its timeout.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import orjson
from anyio.abc import Process

from ..jsonrpc.errors import INTERNAL_ERROR, RpcError
from ..jsonrpc.framing import FrameTooLarge, LineFramer
from ..jsonrpc.messages import Response, parse_frame
from . import family
from .specs import ServerSpec

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

__all__ = ["BASE_ENV", "Pipes", "connect", "environment", "kill_all", "spawn", "stop"]

log = logging.getLogger("acp_bridge.mcp")
# What the servers write on their stderr (shown at the default level).
stderr_log = logging.getLogger("acp_bridge.mcp.stderr")

BASE_ENV: Final = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR")
STDERR_BUDGET: Final = 64 * 1024
LINE_LIMIT: Final = 2000
MAX_MESSAGE: Final = 64 * 1024 * 1024
# Bytes that may wait to be written to a server's stdin (besides the one frame
# being written): more means it does not read.
QUEUE_LIMIT: Final = 16 * 1024 * 1024
# Grace periods of the stop sequence (seconds): after EOF, after SIGTERM.
EOF_GRACE: Final = 1.0
TERM_GRACE: Final = 1.0

# The servers still running: their pid (and process group) and family mark.
_live: dict[int, str] = {}


def environment(spec: ServerSpec, base: Any = None) -> dict[str, str]:
    source = os.environ if base is None else base
    env = {k: source[k] for k in BASE_ENV if k in source and not source[k].startswith("()")}
    env.update(dict(spec.env))
    return env


async def spawn(spec: ServerSpec, cwd: str) -> Process:
    """Start the server's process (OSError when it cannot be started)."""
    mark = family.new_mark()
    process = await anyio.open_process(
        [spec.command, *spec.args],
        env={**environment(spec), family.MARK: mark},
        cwd=cwd,
        start_new_session=True,
    )
    _live[process.pid] = mark
    return process


def _signal(process: Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _exited(process: Process, within: float) -> bool:
    # Polled: Process.wait also waits for the pipes, which a grandchild may hold open.
    with anyio.move_on_after(within):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return process.returncode is not None


async def _family(process: Process) -> set[family.Member]:
    mark = _live.get(process.pid)
    if mark is None:
        return set()
    return await anyio.to_thread.run_sync(family.find, process.pid, mark)


async def stop(process: Process) -> None:
    """EOF, then SIGTERM, then SIGKILL to the process group, each after a grace
    period; then the same to what is left of the server's family (processes
    that left its group: `acp_bridge.mcp.family`).  Shielded, bounded."""
    with anyio.CancelScope(shield=True):
        # Found while the server stands: its descendants by their parent links.
        members = await _family(process)
        if process.stdin is not None:
            # Bounded: closing waits for buffered data a server that does not read never takes.
            with contextlib.suppress(Exception), anyio.move_on_after(EOF_GRACE):
                await process.stdin.aclose()
        if not await _exited(process, EOF_GRACE):
            _signal(process, signal.SIGTERM)
            if not await _exited(process, TERM_GRACE):
                _signal(process, signal.SIGKILL)
                await _exited(process, 1.0)
        # Whatever the leader did, nothing of its group stays behind.
        _signal(process, signal.SIGKILL)
        rest = {m for m in members | await _family(process) if family.alive(m)}
        if rest:
            family.signal_all(rest, signal.SIGTERM)
            with anyio.move_on_after(TERM_GRACE):
                while any(family.alive(m) for m in rest):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            family.signal_all(rest, signal.SIGKILL)
        _live.pop(process.pid, None)
        with contextlib.suppress(Exception):
            await process.aclose()


def kill_all() -> None:
    """SIGKILL every server still running and its family (at exit)."""
    for pid, mark in list(_live.items()):
        members = family.find(pid, mark)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        family.signal_all(members, signal.SIGKILL)
        _live.pop(pid, None)


async def drain_stderr(process: Process, name: str) -> None:
    """The child's stderr to the bridge's log, bounded."""
    if process.stderr is None:
        return
    budget = STDERR_BUDGET
    pending = b""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
        while True:
            chunk = await process.stderr.receive()
            if budget <= 0:
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > LINE_LIMIT:
                lines.append(pending)
                pending = b""
            for line in lines:
                budget -= len(line) + 1
                text = line.decode(errors="replace").rstrip()[:LINE_LIMIT]
                if text:
                    # Each line is its own message: the repeat filter keys on
                    # the message, and these lines differ (the budget bounds them).
                    stderr_log.warning(f"{name}: {text}")
                if budget <= 0:
                    log.warning("MCP server %s: more stderr output is dropped", name)
                    break


def answered_id(line: bytes) -> str | int | None:
    """The id of a line shaped as an answer (an object with an id and no method)."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or "method" in data:
        return None
    rid = data.get("id")
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _invalid_answer(detail: str) -> str:
    detail = " ".join(detail.split())
    detail = detail if len(detail) <= 300 else detail[:297] + "..."
    return f"the server's answer is not valid JSON-RPC: {detail}"


class _Writes:
    """The ``mcp`` client's write stream: each message encoded at once and
    queued as bytes by `Pipes.send` (so the queue's bound counts them)."""

    def __init__(self, pipes: Pipes) -> None:
        self._pipes = pipes

    async def send(self, item: Any, /) -> None:
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._pipes.send(data.encode() + b"\n")

    async def aclose(self) -> None:
        pass

    async def __aenter__(self) -> _Writes:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class Pipes:
    """The child's stdin and stdout as JSON-RPC messages, in two phases.

    First each line the server sends is parsed by `acp_bridge.jsonrpc` and
    given to ``on_message`` (the bridge's own `acp_bridge.mcp.handshake`),
    and `send` writes frames.  `hand_over` (once the ``mcp`` package is
    loaded) switches to the streams of ``SessionMessage`` an ``mcp``
    ``ClientSession`` reads and writes; lines from then on go to it.  The
    switch happens between two lines, so each line goes to exactly one side.

    Frames wait for the writer as bytes; over `QUEUE_LIMIT` of them the
    server is not reading: `broken` says so and ``on_broken`` is called.
    """

    def __init__(
        self, on_message: Callable[[Any], None], on_broken: Callable[[], None] = lambda: None
    ) -> None:
        self.on_message = on_message
        self.on_broken = on_broken
        self.broken: str | None = None
        # Bytes in ``out``, not yet taken by the writer.
        self.queued = 0
        self._out_in, self.out = anyio.create_memory_object_stream[bytes](math.inf)
        self._read_in, self._read_out = anyio.create_memory_object_stream[Any](0)
        self._parse: Callable[[bytes], Any] | None = None
        self._answer_error: Callable[[str | int, str], Any] | None = None

    def send(self, frame: bytes) -> None:
        if self.broken is not None:
            return
        if self.queued + len(frame) > QUEUE_LIMIT:
            self.broken = (
                f"it does not read what the bridge sends ({QUEUE_LIMIT // (1024 * 1024)} MiB "
                "waiting to be written): it was disconnected"
            )
            self.on_broken()
            return
        # A copy of its exact size: orjson's bytes keep a buffer of at least
        # 4 KiB, which would make a waiting ping answer cost a hundred times its size.
        frame = bytes(memoryview(frame))
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._out_in.send_nowait(frame)
            self.queued += len(frame)

    def taken(self, frame: bytes) -> None:
        """The writer took ``frame`` from the queue."""
        self.queued -= len(frame)

    def hand_over(self) -> tuple[MemoryObjectReceiveStream[Any], Any]:
        """The (read, write) streams of a ``ClientSession``; needs the ``mcp`` package."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        adapter = mcp_types.jsonrpc_message_adapter

        def parse(line: bytes) -> Any:
            return SessionMessage(adapter.validate_json(line))

        def answer_error(rid: str | int, message: str) -> Any:
            error = mcp_types.ErrorData(code=INTERNAL_ERROR, message=message)
            return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

        self._parse = parse
        self._answer_error = answer_error
        return self._read_out, _Writes(self)

    async def deliver(self, line: bytes, name: str) -> None:
        """One line from the server, to the side that has the connection now.

        A line that is not valid but has the id of an answer answers that
        request with an error (a call does not wait for its timeout)."""
        parse = self._parse
        if parse is None:
            # The handshake's answers: the tools listed are bounded one by
            # one where they are admitted (`acp_bridge.mcp.link`).
            message = parse_frame(line, bounded=False)
            if isinstance(message, RpcError):
                log.warning("MCP server %s sent a line that is not JSON-RPC", name)
                rid = answered_id(line)
                if rid is not None:
                    detail = str((message.data or {}).get("detail", message.message))
                    error = {"code": INTERNAL_ERROR, "message": _invalid_answer(detail)}
                    self.on_message(Response(rid, error=error))
                return
            self.on_message(message)
            return
        item: Any
        try:
            item = parse(line)
        except ValueError as exc:
            log.warning("MCP server %s sent a line that is not JSON-RPC", name)
            rid = answered_id(line)
            assert self._answer_error is not None
            item = exc if rid is None else self._answer_error(rid, _invalid_answer(str(exc)))
        await self._read_in.send(item)

    def ended(self) -> None:
        """The server closed its stdout: the client reads the end of its stream."""
        self._read_in.close()

    def close(self) -> None:
        for stream in (self._read_out, self._read_in, self._out_in, self.out):
            stream.close()


@contextlib.asynccontextmanager
async def connect(
    process: Process, name: str, on_message: Callable[[Any], None], on_eof: Callable[[], None]
) -> AsyncIterator[Pipes]:
    """The child's pipes as `Pipes`.

    ``on_eof`` is called when the child closes its stdout (it exited or
    crashed), or when it does not read its stdin (`Pipes.broken` says so).
    Leaving the context stops the child (`stop`)."""
    pipes = Pipes(on_message, on_eof)
    assert process.stdout is not None
    assert process.stdin is not None
    stdout, stdin = process.stdout, process.stdin

    async def reader() -> None:
        framer = LineFramer(MAX_MESSAGE)
        try:
            while True:
                try:
                    chunk = await stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                    return
                frames = framer.feed(chunk)
                too_large = framer.discarding or any(type(f) is FrameTooLarge for f in frames)
                for frame in frames:
                    if isinstance(frame, FrameTooLarge):
                        break
                    await pipes.deliver(frame, name)
                if too_large:
                    log.warning("MCP server %s: a message over %d bytes", name, MAX_MESSAGE)
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            pipes.ended()
            on_eof()

    async def writer() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with pipes.out:
                async for frame in pipes.out:
                    pipes.taken(frame)
                    await stdin.send(frame)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        tg.start_soon(drain_stderr, process, name)
        try:
            yield pipes
        finally:
            await stop(process)
            tg.cancel_scope.cancel()
            pipes.close()
