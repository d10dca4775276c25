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
  period, and every child still alive when the bridge exits is killed
  (`kill_all`);
* its stderr goes to the bridge's stderr log, line by line under the
  server's name, bounded (`STDERR_BUDGET` bytes per server, then one line
  saying the rest is dropped; the pipe is still drained).
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
from anyio.abc import Process

from ..jsonrpc.errors import RpcError
from ..jsonrpc.messages import parse_frame
from .specs import ServerSpec

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["BASE_ENV", "Pipes", "connect", "environment", "kill_all", "spawn", "stop"]

log = logging.getLogger("acp_bridge.mcp")
# What the servers write on their stderr (shown at the default level).
stderr_log = logging.getLogger("acp_bridge.mcp.stderr")

BASE_ENV: Final = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TMPDIR")
STDERR_BUDGET: Final = 64 * 1024
LINE_LIMIT: Final = 2000
MAX_MESSAGE: Final = 64 * 1024 * 1024
# Grace periods of the stop sequence (seconds): after EOF, after SIGTERM.
EOF_GRACE: Final = 1.0
TERM_GRACE: Final = 1.0

# Process groups of the children still running.
_live: set[int] = set()


def environment(spec: ServerSpec, base: Any = None) -> dict[str, str]:
    source = os.environ if base is None else base
    env = {k: source[k] for k in BASE_ENV if k in source and not source[k].startswith("()")}
    env.update(dict(spec.env))
    return env


async def spawn(spec: ServerSpec, cwd: str) -> Process:
    """Start the server's process (OSError when it cannot be started)."""
    process = await anyio.open_process(
        [spec.command, *spec.args],
        env=environment(spec),
        cwd=cwd,
        start_new_session=True,
    )
    _live.add(process.pid)
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


async def stop(process: Process) -> None:
    """EOF, then SIGTERM, then SIGKILL (to the process group); shielded, bounded."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                await process.stdin.aclose()
        if not await _exited(process, EOF_GRACE):
            _signal(process, signal.SIGTERM)
            if not await _exited(process, TERM_GRACE):
                _signal(process, signal.SIGKILL)
                await _exited(process, 1.0)
        # Whatever the leader did, nothing of its group stays behind.
        _signal(process, signal.SIGKILL)
        _live.discard(process.pid)
        with contextlib.suppress(Exception):
            await process.aclose()


def kill_all() -> None:
    """SIGKILL every child process group still running (at exit)."""
    for pgid in list(_live):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _live.discard(pgid)


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


class Pipes:
    """The child's stdin and stdout as JSON-RPC messages, in two phases.

    First each line the server sends is parsed by `acp_bridge.jsonrpc` and
    given to ``on_message`` (the bridge's own `acp_bridge.mcp.handshake`),
    and `send` writes frames.  `hand_over` (once the ``mcp`` package is
    loaded) switches to the streams of ``SessionMessage`` an ``mcp``
    ``ClientSession`` reads and writes; lines from then on go to it.  The
    switch happens between two lines, so each line goes to exactly one side.
    """

    def __init__(self, on_message: Callable[[Any], None]) -> None:
        self.on_message = on_message
        # Frames (bytes) and, after the hand-over, the client's SessionMessages.
        self._out_in, self.out = anyio.create_memory_object_stream[Any](math.inf)
        self._read_in, self._read_out = anyio.create_memory_object_stream[Any](0)
        self._parse: Callable[[bytes], Any] | None = None

    def send(self, frame: bytes) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._out_in.send_nowait(frame)

    def hand_over(self) -> tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]:
        """The (read, write) streams of a ``ClientSession``; needs the ``mcp`` package."""
        import mcp_types
        from mcp.shared.message import SessionMessage

        adapter = mcp_types.jsonrpc_message_adapter

        def parse(line: bytes) -> Any:
            return SessionMessage(adapter.validate_json(line))

        self._parse = parse
        return self._read_out, self._out_in.clone()

    async def deliver(self, line: bytes, name: str) -> None:
        """One line from the server, to the side that has the connection now."""
        parse = self._parse
        if parse is None:
            # The handshake's answers: the tools listed are bounded one by
            # one where they are admitted (`acp_bridge.mcp.link`).
            message = parse_frame(line, bounded=False)
            if isinstance(message, RpcError):
                log.warning("MCP server %s sent a line that is not JSON-RPC", name)
                return
            self.on_message(message)
            return
        item: Any
        try:
            item = parse(line)
        except ValueError as exc:
            log.warning("MCP server %s sent a line that is not JSON-RPC", name)
            item = exc
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
    crashed).  Leaving the context stops the child (`stop`)."""
    pipes = Pipes(on_message)
    assert process.stdout is not None
    assert process.stdin is not None
    stdout, stdin = process.stdout, process.stdin

    async def reader() -> None:
        buffer = b""
        try:
            while True:
                try:
                    chunk = await stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > MAX_MESSAGE:
                    log.warning("MCP server %s: a message over %d bytes", name, MAX_MESSAGE)
                    return
                for line in lines:
                    if line.strip():
                        await pipes.deliver(line, name)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            pipes.ended()
            on_eof()

    async def writer() -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with pipes.out:
                async for item in pipes.out:
                    if isinstance(item, bytes):
                        data = item
                    else:  # a SessionMessage of the mcp client
                        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                        data = data.encode() + b"\n"
                    await stdin.send(data)

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
