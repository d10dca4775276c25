"""The agent as a child process: raw pipes the client reads and writes.

`open_agent` starts a command on two raw pipes (`FdSink` for its stdin,
`FdSource` for its stdout) and returns the `AgentProcess`; nothing buffers
the agent's output ahead of the reader, so pausing the reader really leaves
the agent facing a full pipe.  `acp_bridge.client.spawn` puts an `AcpClient`
on it.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import anyio
import anyio.abc

__all__ = [
    "AgentProcess",
    "ChildProcess",
    "FdSink",
    "FdSource",
    "agent_on_pipes",
    "bridge_command",
    "open_agent",
]


def bridge_command(*args: str) -> list[str]:
    """The command line that runs ``acp-bridge`` with this Python (or this
    executable, in a single-file build, which has no ``-m``)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *args]
    return [sys.executable, "-m", "acp_bridge", *args]


class FdSink:
    """A `ByteSink` on a raw descriptor (the agent's stdin): non-blocking writes,
    no buffer of its own, so a write waits exactly as long as the pipe is full.

    ``written`` counts the bytes the pipe has taken (a write cancelled while
    it waits has taken only part of its data).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.written = 0
        self.closed = False
        os.set_blocking(fd, False)

    async def send(self, data: bytes, /) -> None:
        view = memoryview(data)
        while view:
            if self.closed:
                # Never wait on (or write to) a closed descriptor: its number
                # may already belong to another file.
                raise anyio.ClosedResourceError
            await anyio.wait_writable(self.fd)
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                continue
            self.written += n
            view = view[n:]

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


class FdSource:
    """The agent's stdout as an async iterable of bytes from a raw descriptor,
    one read at a time and nothing read ahead: while `pause` holds (until
    `resume`), nothing is read, so the agent meets a full pipe, as it does
    with an editor that is busy elsewhere.
    """

    def __init__(self, fd: int, *, paused: bool = False) -> None:
        self.fd = fd
        self.closed = False
        self._go = anyio.Event()
        if not paused:
            self._go.set()
        os.set_blocking(fd, False)

    def pause(self) -> None:
        """Read nothing more (a read already under way still completes)."""
        if self._go.is_set():
            self._go = anyio.Event()

    def resume(self) -> None:
        self._go.set()

    def unread(self) -> int:
        """How many bytes the agent has written that wait in the pipe, unread.

        With `pause`, a test can wait until the pipe is full (compare with
        the pipe's size) instead of sleeping and hoping it is.
        """
        buf = bytearray(4)
        fcntl.ioctl(self.fd, termios.FIONREAD, buf)
        return int.from_bytes(buf, sys.byteorder)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while not self.closed:
            await self._go.wait()
            await anyio.wait_readable(self.fd)
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                return
            yield data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


class ChildProcess(Protocol):
    """What `AgentProcess` needs of the agent's process: an `anyio.abc.Process`
    (what `open_agent` starts), or any other handle on a process that runs on
    our pipes (a test suite can fork bridges from a pre-imported one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def send_signal(self, signum: signal.Signals, /) -> None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...

    async def aclose(self) -> None: ...


@dataclass
class AgentProcess:
    """A spawned agent: its process, and our ends of its stdin and stdout pipes."""

    process: ChildProcess
    stdin: FdSink
    stdout: FdSource

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def send_signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    async def wait(self, *, within: float = 60) -> int:
        """The exit status; `TimeoutError` after ``within`` seconds."""
        with anyio.fail_after(within):
            return await self.process.wait()

    async def aclose(self) -> None:
        """Kill the agent if it still runs and close our pipe ends."""
        if self.process.returncode is None:
            self.process.kill()
            with anyio.CancelScope(shield=True):
                await self.process.wait()
        await self.stdin.aclose()
        self.stdout.close()
        await self.process.aclose()


async def open_agent(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    umask: int = -1,
    paused: bool = False,
    cwd: str | Path | None = None,
) -> AgentProcess:
    """Start ``command`` on raw pipes (see `acp_bridge.client.spawn` for the options)."""

    async def start(stdin: int, stdout: int, err: int | IO[Any] | None) -> ChildProcess:
        return await anyio.open_process(
            list(command), stdin=stdin, stdout=stdout, stderr=err, env=env, umask=umask, cwd=cwd
        )

    return await agent_on_pipes(start, stderr=stderr, paused=paused)


StartOnPipes = Callable[[int, int, "int | IO[Any] | None"], Awaitable[ChildProcess]]


async def agent_on_pipes(
    start: StartOnPipes, *, stderr: int | IO[Any] | Path | None = None, paused: bool = False
) -> AgentProcess:
    """Make the agent's two pipes, ``start(stdin, stdout, stderr)`` a process on
    their far ends (a `Path` for stderr is opened, truncated, as a file), close
    our copies of those ends, and return the `AgentProcess` on ours."""
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    err = (
        os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if isinstance(stderr, Path)
        else stderr
    )
    try:
        process = await start(to_agent_r, from_agent_w, err)
    except BaseException:
        for fd in (to_agent_w, from_agent_r):
            os.close(fd)
        raise
    finally:
        for fd in (
            to_agent_r,
            from_agent_w,
            *((err,) if isinstance(err, int) and isinstance(stderr, Path) else ()),
        ):
            os.close(fd)
    return AgentProcess(process, FdSink(to_agent_w), FdSource(from_agent_r, paused=paused))
