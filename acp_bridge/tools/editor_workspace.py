"""The editor as a workspace (`acp_bridge.tools.workspace`), and the choice of
a session's workspace.

``fs/read_text_file`` and ``fs/write_text_file`` (which see unsaved buffers)
get the target's resolved path, spelled from the session's root; a command
runs in ``terminal/create`` (``/bin/sh -c COMMAND``), embedded in the tool call
so the user watches it live, and ends with ``terminal/release``.  Each is used
only when the editor advertised it in ``initialize``: the file operations it
did not advertise go to the local disk, and without ``terminal`` no command
runs (ACP v1, as the bridge always did).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .local_workspace import LOCAL_FILES, LocalWorkspace
from .outcome import ToolError
from .workspace import OUTPUT_BYTE_LIMIT, Call, CommandOutput, Offers, Target, Terminal, Workspace

__all__ = ["EditorTerminal", "EditorWorkspace", "choose"]


def choose(capabilities: Offers) -> Workspace:
    """The session's workspace, from what the editor advertised in ``initialize``:
    the editor for what it offers, the local disk for the rest of the files."""
    if capabilities.read_text_file or capabilities.write_text_file or capabilities.terminal:
        return EditorWorkspace(
            capabilities.read_text_file, capabilities.write_text_file, capabilities.terminal
        )
    return LOCAL_FILES


@dataclass(frozen=True)
class EditorWorkspace:
    """The editor's ``fs/*`` and ``terminal/*``, for what it advertised; the local
    disk for the file operations it did not."""

    read_text_file: bool
    write_text_file: bool
    terminal: bool
    local: LocalWorkspace = LOCAL_FILES

    async def read_text(
        self, call: Call, target: Target, line: int | None, limit: int | None
    ) -> str:
        if not self.read_text_file:
            return await self.local.read_text(call, target, line, limit)
        params: dict[str, Any] = {"sessionId": call.session_id, "path": target.spelled}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = await call.request("fs/read_text_file", params)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError(f"the editor returned no content for {target.path}")
        return content

    async def write_text(self, call: Call, target: Target, content: str) -> None:
        if not self.write_text_file:
            return await self.local.write_text(call, target, content)
        await call.settle(
            "fs/write_text_file",
            {"sessionId": call.session_id, "path": target.spelled, "content": content},
        )

    async def start_command(self, call: Call, command: str, cwd: str) -> Terminal:
        if not self.terminal:
            return await self.local.start_command(call, command, cwd)
        created = await call.settle(
            "terminal/create",
            {
                "sessionId": call.session_id,
                "command": "/bin/sh",
                "args": ["-c", command],
                "env": [{"name": name, "value": ""} for name in call.hidden_env],
                "cwd": cwd,
                "outputByteLimit": OUTPUT_BYTE_LIMIT,
            },
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            raise ToolError("the editor did not return a terminal id")
        return EditorTerminal(call, terminal_id)


def _command_output(out: Any) -> CommandOutput:
    """A ``terminal/output`` answer."""
    if not isinstance(out, dict):
        return CommandOutput()
    output = out.get("output", "")
    status = out.get("exitStatus")
    code = status.get("exitCode") if isinstance(status, dict) else None
    died = status.get("signal") if isinstance(status, dict) else None
    return CommandOutput(
        output if isinstance(output, str) else "", out.get("truncated") is True, code, died
    )


class EditorTerminal:
    """A terminal of the editor, embedded in the tool call."""

    def __init__(self, call: Call, terminal_id: str) -> None:
        self.call = call
        self.ids = {"sessionId": call.session_id, "terminalId": terminal_id}
        self.content: list[dict[str, Any]] = [{"type": "terminal", "terminalId": terminal_id}]

    async def wait(self) -> None:
        await self.call.request("terminal/wait_for_exit", self.ids)

    async def kill(self) -> None:
        await self.call.request("terminal/kill", self.ids)

    async def output(self) -> CommandOutput:
        return _command_output(await self.call.request("terminal/output", self.ids))

    async def stop(self) -> CommandOutput | None:
        await self.call.cleanup("terminal/kill", self.ids)
        out = await self.call.cleanup("terminal/output", self.ids)
        return None if out is None else _command_output(out)

    async def release(self) -> None:
        await self.call.cleanup("terminal/release", self.ids)
