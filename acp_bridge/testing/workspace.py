"""An editor's side of tools: files and terminals served from a workspace folder.

`WorkspaceEditor(root).install(client, task_group)` fills `AcpClient.handlers`
with ``fs/read_text_file``, ``fs/write_text_file``, ``terminal/*`` and
``session/request_permission``.  Files are read and written on the disk, as
an editor with no unsaved buffers does (paths must be absolute, as ACP
requires); terminals are real processes whose output is kept in memory.
Every request the agent made is in ``calls`` (method, params), in arrival order.

Permission requests are answered from ``permission_answers``, in order: an
``optionId``, ``"dismiss"`` (outcome ``cancelled``), ``"hang"`` (never answered
until the agent sends ``$/cancel_request``), a `Raw` result sent exactly as
given (a malformed answer), or an async callable returning one of those.
With the list empty, the answer is ``"dismiss"``.
(`acp_bridge.testing.Agent` answers permissions by a policy instead.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ..client import AcpClient
from ..jsonrpc.errors import RemoteError

Json = dict[str, Any]
Handler = Callable[[Json], Awaitable[Any]]

FULL_CAPABILITIES: Json = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
"""The client capabilities of an editor that serves files and terminals."""

NO_CAPABILITIES: Json = {"fs": {"readTextFile": False, "writeTextFile": False}}
"""The client capabilities of an editor that serves neither files nor terminals."""


@dataclass
class Terminal:
    """A ``terminal/create`` the editor ran."""

    process: anyio.abc.Process
    args: list[str] = field(default_factory=list)
    output: bytearray = field(default_factory=bytearray)
    exited: anyio.Event = field(default_factory=anyio.Event)
    exit_code: int | None = None
    signal: str | None = None
    killed: bool = False
    released: bool = False

    def status(self) -> Json | None:
        if not self.exited.is_set():
            return None
        return {"exitCode": self.exit_code, "signal": self.signal}


@dataclass(frozen=True)
class Raw:
    """A permission answer sent exactly as given (a malformed one, say)."""

    result: Any


class WorkspaceEditor:
    """Serves ``fs/*``, ``terminal/*`` and permission requests (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, Json]] = []
        self.terminals: dict[str, Terminal] = {}
        # Answers to permission requests, in order (see the module docstring).
        self.permission_answers: list[Any] = []
        self.served_answers: list[str] = []
        # Methods whose requests are never answered (until $/cancel_request).
        self.hang: set[str] = set()
        # Methods never answered, even after $/cancel_request (until `released`).
        self.wedge: set[str] = set()
        self.released = anyio.Event()
        # Methods answered only once their event is set (the work is done at
        # once; a $/cancel_request meanwhile does not undo it).
        self.hold_answer: dict[str, anyio.Event] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def install(self, client: AcpClient, tg: anyio.abc.TaskGroup) -> None:
        """Answer the agent's file, terminal and permission requests on ``client``;
        terminal output is read by tasks of ``tg``."""
        self._tg = tg
        handlers: dict[str, Handler] = {
            "fs/read_text_file": self.read,
            "fs/write_text_file": self.write,
            "terminal/create": self.create,
            "terminal/output": self.output,
            "terminal/wait_for_exit": self.wait_for_exit,
            "terminal/kill": self.kill,
            "terminal/release": self.release,
            "session/request_permission": self.permission,
        }
        for method, handler in handlers.items():
            client.handlers[method] = self.wrap(method, handler)

    def wrap(self, method: str, handler: Handler) -> Handler:
        """``handler`` with the request recorded in `calls` and `hang`, `wedge`
        and `hold_answer` applied."""

        async def serve(params: Json) -> Any:
            self.calls.append((method, params))
            if method in self.wedge:
                with anyio.CancelScope(shield=True):
                    await self.released.wait()
                raise RemoteError(-32603, "released")
            if method in self.hang:
                await anyio.sleep_forever()
            result = await handler(params)
            gate = self.hold_answer.get(method)
            if gate is not None:
                with anyio.CancelScope(shield=True):
                    await gate.wait()
            return result

        return serve

    def methods(self) -> list[str]:
        """The methods of the agent's requests, in arrival order."""
        return [method for method, _ in self.calls]

    # -- files -----------------------------------------------------------------

    def _path(self, params: Json) -> anyio.Path:
        path = Path(params["path"])
        if not path.is_absolute():
            raise RemoteError(-32602, "path must be absolute")
        return anyio.Path(path)

    async def read(self, params: Json) -> Json:
        path = self._path(params)
        try:
            text = await path.read_text()
        except FileNotFoundError:
            raise RemoteError(-32002, f"Resource not found: {path}") from None
        line, limit = params.get("line"), params.get("limit")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(lines[start : start + limit if limit else None])
        return {"content": text}

    async def write(self, params: Json) -> Json:
        path = self._path(params)
        await path.parent.mkdir(parents=True, exist_ok=True)
        await path.write_text(params["content"])
        return {}

    # -- terminals -------------------------------------------------------------

    async def create(self, params: Json) -> Json:
        env = dict(os.environ)
        for var in params.get("env", []):
            env[var["name"]] = var["value"]
        process = await anyio.open_process(
            [params["command"], *params.get("args", [])],
            cwd=params.get("cwd"),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        terminal_id = f"term_{len(self.terminals) + 1}"
        terminal = self.terminals[terminal_id] = Terminal(process, list(params.get("args", [])))
        assert self._tg is not None, "install() first"
        self._tg.start_soon(self._pump, terminal)
        return {"terminalId": terminal_id}

    async def _pump(self, terminal: Terminal) -> None:
        assert terminal.process.stdout is not None
        async for data in terminal.process.stdout:
            terminal.output.extend(data)
        code = await terminal.process.wait()
        if code < 0:
            terminal.signal = signal.Signals(-code).name
        else:
            terminal.exit_code = code
        terminal.exited.set()

    def _terminal(self, params: Json) -> Terminal:
        terminal = self.terminals.get(params["terminalId"])
        if terminal is None or terminal.released:
            raise RemoteError(-32602, "no such terminal")
        return terminal

    async def output(self, params: Json) -> Json:
        terminal = self._terminal(params)
        if terminal.killed:
            await terminal.exited.wait()
        return {
            "output": terminal.output.decode(errors="replace"),
            "truncated": False,
            "exitStatus": terminal.status(),
        }

    async def wait_for_exit(self, params: Json) -> Json:
        terminal = self._terminal(params)
        await terminal.exited.wait()
        status = terminal.status()
        assert status is not None
        return status

    async def kill(self, params: Json) -> Json:
        terminal = self._terminal(params)
        terminal.killed = True
        if not terminal.exited.is_set():
            _kill_group(terminal)
        return {}

    async def release(self, params: Json) -> Json:
        terminal = self._terminal(params)
        if not terminal.exited.is_set():
            _kill_group(terminal)
        terminal.released = True
        return {}

    def running(self) -> list[str]:
        """The ids of the terminals whose command still runs."""
        return [tid for tid, t in self.terminals.items() if not t.exited.is_set()]

    def kill_all(self) -> None:
        """Kill every command still running (the editor goes away)."""
        for terminal in self.terminals.values():
            if not terminal.exited.is_set():
                _kill_group(terminal)

    def wait_output(self, text: str) -> Callable[[], bool]:
        """A condition: some terminal printed ``text``."""
        return lambda: any(text.encode() in t.output for t in self.terminals.values())

    def waiting_on_command(self, text: str) -> Callable[[], bool]:
        """A command printed ``text`` and the agent waits for it to exit: a Stop
        from here on finds it running (before its wait_for_exit request, the
        Stop would race with that request, and the transcript with it)."""
        printed = self.wait_output(text)
        return lambda: printed() and "terminal/wait_for_exit" in self.methods()

    # -- permissions -----------------------------------------------------------

    async def permission(self, params: Json) -> Any:
        answer: Any = self.permission_answers.pop(0) if self.permission_answers else "dismiss"
        if callable(answer):
            answer = await answer()
        if isinstance(answer, Raw):
            self.served_answers.append("raw")
            return answer.result
        self.served_answers.append(answer)
        if answer == "hang":
            await anyio.sleep_forever()
        if answer == "dismiss":
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": answer}}

    def asked(self) -> Callable[[], bool]:
        """A condition: the agent asked for a permission."""
        return lambda: "session/request_permission" in self.methods()


def _kill_group(terminal: Terminal) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(terminal.process.pid, signal.SIGKILL)


__all__ = ["FULL_CAPABILITIES", "NO_CAPABILITIES", "Raw", "Terminal", "WorkspaceEditor"]
