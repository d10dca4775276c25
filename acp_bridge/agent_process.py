"""The agent as a child process: raw pipes the client reads and writes.

`open_agent` starts a command on two raw pipes (`FdSink` for its stdin,
`FdSource` for its stdout) and returns the `AgentProcess`; nothing buffers
the agent's output ahead of the reader, so pausing the reader really leaves
the agent facing a full pipe.  `acp_bridge.client.spawn` puts an `AcpClient`
on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
import termios
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
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
    "group_members",
    "open_agent",
    "wait_group_empty",
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


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``: read from
    ``/proc`` where there is one, else the group itself if a signal reaches it."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except OSError:
            return []
        return [pgid]
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after it.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def describe_process(pid: int) -> str:
    """``pid (command line)`` for a report, as far as it can be read."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip()
    except OSError:
        return str(pid)
    return f"{pid} ({cmdline.decode(errors='replace')[:120]})"


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


async def wait_group_empty(pgid: int, within: float) -> None:
    """Until process group ``pgid`` has no live process, at most ``within`` seconds.
    Its members are not our children (their parent exited): no event tells
    when they go, so the group is looked at every 20 ms."""
    with anyio.move_on_after(within):
        while group_members(pgid):  # noqa: ASYNC110
            await anyio.sleep(0.02)


@dataclass
class AgentProcess:
    """A spawned agent: its process, and our ends of its stdin and stdout pipes.

    With ``group`` the agent leads a process group of its own (`open_agent`
    starts it in a new session), and ending it ends the whole group: the
    helpers a launcher or the agent started go with it.
    """

    process: ChildProcess
    stdin: FdSink
    stdout: FdSource
    group: bool = False
    term_grace: float = 0.0
    """Seconds between SIGTERM and SIGKILL when ending the group (0: SIGKILL at once)."""
    survivors: list[str] = field(default_factory=list)
    """The processes of the group still running once the agent itself had
    exited or was ended (``pid (command)``); they were ended too."""

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
        """Kill the agent if it still runs (its whole group, with ``group``) and
        close our pipe ends."""
        with anyio.CancelScope(shield=True):
            if self.group:
                await self._end_group()
            elif self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
        await self.stdin.aclose()
        self.stdout.close()
        await self.process.aclose()

    async def _end_group(self) -> None:
        """SIGTERM, then after ``term_grace`` SIGKILL, to the agent's group; then
        the same to what is left of the group once the agent is gone."""
        pgid = self.process.pid
        if self.process.returncode is None:
            if self.term_grace > 0:
                _signal_group(pgid, signal.SIGTERM)
                with anyio.move_on_after(self.term_grace):
                    await self.process.wait()
            _signal_group(pgid, signal.SIGKILL)
            await self.process.wait()
        left = group_members(pgid)
        if not left:
            return
        self.survivors = [describe_process(pid) for pid in left]
        if self.term_grace > 0:
            _signal_group(pgid, signal.SIGTERM)
            await wait_group_empty(pgid, self.term_grace)
        _signal_group(pgid, signal.SIGKILL)
        await wait_group_empty(pgid, 5)


async def open_agent(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    umask: int = -1,
    paused: bool = False,
    cwd: str | Path | None = None,
) -> AgentProcess:
    """Start ``command`` on raw pipes, in a session (and process group) of its own
    (see `acp_bridge.client.spawn` for the options)."""

    async def start(stdin: int, stdout: int, err: int | IO[Any] | None) -> ChildProcess:
        return await anyio.open_process(
            list(command),
            stdin=stdin,
            stdout=stdout,
            stderr=err,
            env=env,
            umask=umask,
            cwd=cwd,
            start_new_session=True,
        )

    agent = await agent_on_pipes(start, stderr=stderr, paused=paused)
    agent.group = True
    return agent


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
