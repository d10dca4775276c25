"""The workspace seam: what the tools do to the user's project, and who does it.

A tool reads a text file, writes one, or runs a command (its output read as
it comes, a kill, an exit status) through the session's `Workspace`, chosen
once per session from the editor's capabilities
(`acp_bridge.tools.editor_workspace.choose`):

* `acp_bridge.tools.editor_workspace.EditorWorkspace`: the editor's
  ``fs/read_text_file``, ``fs/write_text_file`` (which see unsaved buffers)
  and ``terminal/*``, each when the editor advertised it; the file operations
  it did not advertise go to the local disk, and without ``terminal`` no
  command runs (ACP v1, as the bridge always did);
* `acp_bridge.tools.local_workspace.LocalWorkspace`: the local disk
  (`acp_bridge.tools.localfs`) and local processes; for an ACP v1 editor that
  offers neither files nor a terminal, its files only (`LOCAL_FILES`); whole,
  for a client without the editor's ``fs/*`` and ``terminal/*`` (ACP v2).

Confinement and permissions sit above the seam, once: the runner decides and
asks the user (`acp_bridge.tools.runner`), and
`acp_bridge.tools.base.ToolContext.target` resolves every path at the moment
of use into a `Target` (inside the session's directories or a path allowed
for the call, never a special file or a system path) before a workspace sees
it.  The local disk opens the target again without following a symlink (a
swap after the check is refused, not followed); the editor is sent the
resolved path.  A command's environment has the call's ``hidden_env`` (the
process's secrets) set empty, and every result is redacted by the runner.

A third workspace, an MCP server the editor passes, would be one more class
with these three methods (see docs/tools.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from .localfs import Bounds
    from .outcome import ToolOutput

__all__ = [
    "NO_TERMINAL",
    "OUTPUT_BYTE_LIMIT",
    "Call",
    "CommandOutput",
    "LiveView",
    "Offers",
    "Target",
    "Terminal",
    "Workspace",
]

# What a terminal keeps of a command's output: its last bytes.
OUTPUT_BYTE_LIMIT: Final = 256 * 1024

NO_TERMINAL: Final = (
    "the editor offers no terminal (it did not advertise the terminal capability), "
    "so commands cannot be run in this session"
)


@dataclass(frozen=True)
class Target:
    """A path a call may use, resolved and checked just now
    (`acp_bridge.tools.base.ToolContext.target`)."""

    # Absolute, as the model named it (what error messages show).
    path: str
    # Its real path, symlinks resolved.
    real: str
    # The real path spelled from the session's root it lies in (what the editor knows).
    spelled: str
    # Where the call may go, for the local disk's open at the moment of use.
    bounds: Bounds


@dataclass
class CommandOutput:
    """What a command printed (the last `OUTPUT_BYTE_LIMIT` bytes) and how it ended."""

    output: str = ""
    # Older output was dropped to keep the last bytes.
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None


class Call(Protocol):
    """What a workspace sees of the running tool call
    (`acp_bridge.tools.base.ToolContext` is one)."""

    session_id: str
    # Variables set empty in a command's environment (the process's secrets).
    hidden_env: tuple[str, ...]
    # Set when the call is stopped and has a real partial result.
    partial: ToolOutput | None

    @property
    def live(self) -> LiveView | None:
        """Shows a command the workspace runs itself live (None: nobody to show it to)."""

    @property
    def request(self) -> Callable[[str, dict[str, Any]], Awaitable[Any]]: ...

    @property
    def settle(self) -> Callable[[str, dict[str, Any]], Awaitable[Any]]: ...

    @property
    def cleanup(self) -> Callable[[str, dict[str, Any]], Awaitable[Any | None]]: ...


class LiveView(Protocol):
    """A command the workspace runs itself, as the client sees it live
    (`acp_bridge.tools.live_terminal.LiveTerminal` is the one)."""

    terminal_id: str
    # Killed by ``terminal/cancel``.
    cancelled: bool
    # Its exit was shown.
    exited: bool

    def started(self, terminal: Terminal, command: str, cwd: str) -> None: ...

    def output(self, data: bytes) -> None:
        """Bytes it printed, as they come."""

    def exit(self, out: CommandOutput) -> None:
        """It has exited (called again: nothing more)."""


class Offers(Protocol):
    """What the editor advertised (`acp_bridge.tools.base.ClientCapabilities`)."""

    @property
    def read_text_file(self) -> bool: ...

    @property
    def write_text_file(self) -> bool: ...

    @property
    def terminal(self) -> bool: ...


class Terminal(Protocol):
    """A running command.  ``content`` is what the tool call embeds (the editor's
    terminal), empty when there is nothing to embed."""

    content: list[dict[str, Any]]

    async def wait(self) -> None:
        """Until the command exits."""

    async def kill(self) -> None: ...

    async def output(self) -> CommandOutput:
        """What it printed so far, and its exit status once it has one."""
        ...

    async def stop(self) -> CommandOutput | None:
        """After a Stop: kill it and read what it printed, shielded and bounded
        (None when that could not be read in time)."""
        ...

    async def release(self) -> None:
        """Always, at the end: nothing of the command is left running."""


class Workspace(Protocol):
    """What the tools do to the user's project (see the module docstring)."""

    async def read_text(
        self, call: Call, target: Target, line: int | None, limit: int | None
    ) -> str: ...

    async def write_text(self, call: Call, target: Target, content: str) -> None: ...

    async def start_command(self, call: Call, command: str, cwd: str) -> Terminal: ...
