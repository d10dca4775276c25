"""An editor's side of tools, for tests: files and terminals served from a
temporary workspace, and scripted answers to permission requests.

`WorkspaceEditor(root).install(client)` fills `AcpClient.handlers` with
``fs/read_text_file``, ``fs/write_text_file``, ``terminal/*`` and
``session/request_permission``.  Terminals are real ``/bin/sh`` processes;
their output is kept in memory.  Every request the agent made is in
``calls`` (method, params), in arrival order.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from acp_bridge.client import AcpClient
from acp_bridge.jsonrpc.errors import RemoteError

Json = dict[str, Any]

# Capabilities of a full editor.
FULL_CAPABILITIES: Json = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


@dataclass
class Terminal:
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
    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[tuple[str, Json]] = []
        self.terminals: dict[str, Terminal] = {}
        # Answers to permission requests, in order: an optionId, "dismiss"
        # (outcome cancelled), "hang" (never answer until cancelled), or a
        # `Raw` result sent as it is.
        self.permission_answers: list[Any] = []
        self.served_answers: list[str] = []
        # Methods whose requests are never answered (until $/cancel_request).
        self.hang: set[str] = set()
        # Methods never answered, even after $/cancel_request (until `release`).
        self.wedge: set[str] = set()
        self.released = anyio.Event()
        # Methods answered only once their event is set (the work is done at
        # once; a $/cancel_request meanwhile does not undo it).
        self.hold_answer: dict[str, anyio.Event] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def install(self, client: AcpClient, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        handlers: dict[str, Callable[[Json], Any]] = {
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
            client.handlers[method] = self._wrap(method, handler)

    def _wrap(self, method: str, handler: Callable[[Json], Any]) -> Callable[[Json], Any]:
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
        return [method for method, _ in self.calls]

    # -- files -----------------------------------------------------------------

    def _path(self, params: Json) -> Path:
        path = Path(params["path"])
        if not path.is_absolute():
            raise RemoteError(-32602, "path must be absolute")
        return path

    async def read(self, params: Json) -> Json:
        path = self._path(params)
        try:
            text = path.read_text()
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
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(params["content"])
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
        assert self._tg is not None
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
            os.killpg(terminal.process.pid, signal.SIGKILL)
        return {}

    async def release(self, params: Json) -> Json:
        terminal = self._terminal(params)
        if not terminal.exited.is_set():
            os.killpg(terminal.process.pid, signal.SIGKILL)
        terminal.released = True
        return {}

    def running(self) -> list[str]:
        return [tid for tid, t in self.terminals.items() if not t.exited.is_set()]

    def wait_output(self, text: str) -> Callable[[], bool]:
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
        return lambda: "session/request_permission" in self.methods()
