"""The local disk and local processes as a workspace (`acp_bridge.tools.workspace`).

Files go through `acp_bridge.tools.localfs`, which opens the checked target
again without following a symlink, in a worker thread.  A command runs as
``/bin/sh -c COMMAND`` in a process group of its own, with stdin from
``/dev/null`` and the hidden variables set empty; its output (stdout and
stderr, as a terminal shows them) is read as it comes, the last
`acp_bridge.tools.workspace.OUTPUT_BYTE_LIMIT` bytes kept, so a kill leaves
what it printed; a kill, and the release every command ends with, signal the
whole group.  Given the call's `acp_bridge.tools.live_terminal.LiveTerminal`,
its output is shown live as it comes, and ``terminal/cancel`` can kill it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import anyio.to_thread

from . import localfs
from .outcome import ToolError, ToolOutput
from .workspace import (
    NO_TERMINAL,
    OUTPUT_BYTE_LIMIT,
    Call,
    CommandOutput,
    LiveView,
    Target,
    Terminal,
)

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["LOCAL_FILES", "LocalTerminal", "LocalWorkspace", "on_disk"]

R = TypeVar("R")

# How long a killed or finished command's last output and exit are waited for.
_DRAIN_S: Final = 2.0


async def on_disk(verb: str, path: str, work: Callable[[], R]) -> R:
    """``work()`` in a worker thread (a Stop abandons it), its failures as `ToolError`s."""
    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except localfs.Refused as exc:
        raise ToolError(str(exc)) from None
    except FileNotFoundError:
        raise ToolError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory") from None
    except OSError as exc:
        what = "read" if verb == "read" else "write"
        raise ToolError(f"cannot {what} {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class LocalWorkspace:
    """The local disk, and local processes when ``commands`` (else a command
    is refused, as for an ACP v1 editor without a terminal)."""

    commands: bool = True

    async def read_text(
        self, call: Call, target: Target, line: int | None, limit: int | None
    ) -> str:
        def read() -> str:
            return localfs.read_text(target.path, target.bounds, line, limit)

        return await on_disk("read", target.path, read)

    async def write_text(self, call: Call, target: Target, content: str) -> None:
        def write() -> None:
            localfs.write_text(target.path, target.bounds, content)

        try:
            await on_disk("write", target.path, write)
        except anyio.get_cancelled_exc_class():
            # Left to its worker thread: the rename may still happen.
            call.partial = ToolOutput(
                f"The user stopped the turn while {target.path} was being written: it holds "
                "either its old content or all of the new one.",
                is_error=True,
            )
            raise

    async def start_command(self, call: Call, command: str, cwd: str) -> Terminal:
        if not self.commands:
            raise ToolError(NO_TERMINAL)
        import subprocess  # at the first local command, not at start-up

        env = {**os.environ, **dict.fromkeys(call.hidden_env, "")}
        try:
            # Shielded: a Stop while it starts still gets a process to kill.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    ["/bin/sh", "-c", command],
                    cwd=cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,  # never the bridge's stdin (the editor's messages)
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,  # one stream, as a terminal shows it
                    start_new_session=True,  # its own process group, killed as one
                )
        except OSError as exc:
            raise ToolError(f"cannot run the command in {cwd}: {exc.strerror or exc}") from None
        live = call.live
        terminal = LocalTerminal(process, live=live)
        if live is not None:
            live.started(terminal, command, cwd)
        return terminal


# Files on the local disk, no commands: an ACP v1 editor that offers neither.
LOCAL_FILES: Final = LocalWorkspace(commands=False)


@dataclass(eq=False)
class LocalTerminal:
    """A local command in its own process group: its output is read as it comes
    (the last `OUTPUT_BYTE_LIMIT` bytes kept), and a kill ends the whole group."""

    process: anyio.abc.Process
    content: list[dict[str, Any]] = field(default_factory=list)
    # Shown live (`acp_bridge.tools.live_terminal`); the tool call embeds it.
    live: LiveView | None = None
    _kept: bytearray = field(default_factory=bytearray)
    _truncated: bool = False
    _eof: anyio.Event = field(default_factory=lambda: anyio.Event())  # anyio loads it then
    # `wait` saw it exit and read what came within the drain time.
    _drained: bool = False

    def __post_init__(self) -> None:
        if self.live is not None:
            self.content = [{"type": "terminal", "terminalId": self.live.terminal_id}]

    async def _pump(self) -> None:
        stream = self.process.stdout
        if stream is None:  # pragma: no cover - opened with a pipe
            self._eof.set()
            return
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
            while True:
                chunk = await stream.receive()
                if self.live is not None:
                    self.live.output(chunk)
                kept = self._kept
                kept += chunk
                if len(kept) > OUTPUT_BYTE_LIMIT:
                    del kept[: len(kept) - OUTPUT_BYTE_LIMIT]
                    self._truncated = True
        self._eof.set()

    async def wait(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump)
            await self.process.wait()
            # What it printed last (a child that keeps the pipe open is not waited for).
            with anyio.move_on_after(_DRAIN_S):
                await self._eof.wait()
            self._drained = True
            tg.cancel_scope.cancel()

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def output(self) -> CommandOutput:
        with anyio.move_on_after(_DRAIN_S):
            if not (self._eof.is_set() or self._drained):
                await self._pump()
            await self.process.wait()
        code = self.process.returncode
        died = None
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                died = signal.Signals(-code).name
            code = None
        live = self.live
        out = CommandOutput(
            self._kept.decode("utf-8", errors="replace"),
            self._truncated,
            code,
            died,
        )
        if live is not None and self.process.returncode is not None:
            live.exit(out)
        return out

    async def stop(self) -> CommandOutput | None:
        with anyio.CancelScope(shield=True):
            await self.kill()
            out = await self.output()
        return out

    async def release(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.kill()  # what it left in the background, too
            if self.live is not None and not self.live.exited:
                await self.output()  # the client sees it exit
            with anyio.move_on_after(_DRAIN_S):
                await self.process.aclose()
