"""The tool interface: what a tool is, what it gets to run, and what it returns.

A tool is a subclass of `Tool` with a pydantic model of its arguments::

    class Args(BaseModel):
        path: str = Field(description="file to count the lines of")

    class CountLines(Tool[Args]):
        name = "count_lines"
        description = "Count the lines of a text file."
        kind = "read"
        args_model = Args

        def title(self, args: Args) -> str:
            return f"Count lines of {args.path}"

        async def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
            text = await ctx.read_text(ctx.resolve(args.path))
            return ToolOutput(str(text.count("\\n")))

The model sees ``name``, ``description`` and the JSON Schema of ``args_model``.
``kind`` is the ACP ``ToolKind`` shown by the editor; ``read_only`` tools run
in every mode without asking, the others follow the session's mode and
permissions (`acp_bridge.tools.permissions`).  ``paths`` names the files a
call touches: each is resolved (symlinks included) and must lie in the
session's directories or the user is asked; what the user allowed is the
resolved path, for this call only.

`ToolContext` is the session seen from a running call: its directories, the
editor's advertised capabilities, editor requests that a Stop cancels, and
`ToolContext.read_text`/`write_text` through the session's workspace (the
editor, or the local disk: `acp_bridge.tools.workspace`); both resolve the
path again when they use it and refuse it unless it still lies in the
session's directories or in a path allowed for the call
(`ToolContext.target`, `acp_bridge.tools.localfs`).  A tool that
can give a real partial result when it is stopped (a command's output so
far) sets ``ctx.partial`` before re-raising the cancellation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

from . import localfs
from .editor_workspace import choose
from .local_workspace import on_disk
from .outcome import ToolError as ToolError
from .outcome import ToolOutput as ToolOutput
from .paths import resolve
from .workspace import Target, Workspace

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .live_terminal import LiveTerminal
    from .plans import Plans

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]

A = TypeVar("A", bound="BaseModel")


EditorRequest = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    # ``elicitation.form``: the editor shows form questions (`acp_bridge.tools.ask_user`).
    elicitation_form: bool = False
    # ``plan``: the editor keeps plans by id (`acp_bridge.tools.plan`).
    plan: bool = False

    @classmethod
    def from_initialize(cls, caps: dict[str, Any] | None) -> ClientCapabilities:
        caps = caps or {}
        fs = caps.get("fs") if isinstance(caps.get("fs"), dict) else {}
        assert isinstance(fs, dict)
        elicitation = caps.get("elicitation")
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            elicitation_form=isinstance(elicitation, dict)
            and isinstance(elicitation.get("form"), dict),
            plan=isinstance(caps.get("plan"), dict),
        )


@dataclass
class ToolContext:
    """What a running tool call can see and do."""

    session_id: str
    cwd: str
    roots: list[str]
    capabilities: ClientCapabilities
    call_id: str
    # An editor request made through the turn: a Stop cancels it (and sends
    # $/cancel_request); it raises RemoteError when the editor answers an error.
    request: EditorRequest
    # An editor request whose effect must be known (creating a terminal,
    # writing a file): a Stop waits a bounded while for its answer, then the
    # cancellation is raised (the effect, if any, has happened).
    settle: EditorRequest
    # An editor request for cleanup after a Stop or a timeout: shielded from
    # the cancellation and bounded by a share of the cancel deadline; None
    # when it did not answer in time.
    cleanup: Callable[[str, dict[str, Any]], Awaitable[Any | None]]
    # Sends a non-final tool_call_update for this call (e.g. an embedded terminal).
    update: Callable[[dict[str, Any]], None]
    # Whether the turn has been stopped (a Stop, not a timeout).
    stopped: Callable[[], bool]
    # Variables a command must not inherit (the provider's API keys).
    hidden_env: tuple[str, ...] = ()
    timeout_s: float = 300.0
    max_output: int = 50_000
    # Set by a tool that is being cancelled and has a real partial result.
    partial: ToolOutput | None = None
    # Real paths outside the session's directories that the user allowed for
    # this call (set by the runner once the user said yes).
    allowed: tuple[str, ...] = ()
    # Sends a session/update of the turn (a plan); nothing once the turn ended.
    emit: Callable[[dict[str, Any]], None] | None = None
    # The session's plans (`acp_bridge.tools.plan`).
    plans: Plans | None = None
    # Where files are read and written and commands run: the session's, chosen
    # once from the editor's capabilities (`acp_bridge.tools.workspace.choose`).
    workspace: Workspace | None = None
    # Starts child sessions (`acp_bridge.tools.subagent.SubagentHost`); None: none.
    subagents: Any = None
    # Shows a command the workspace runs itself (a local one) live, and lets
    # ``terminal/cancel`` kill it (`acp_bridge.tools.live_terminal`).
    live: LiveTerminal | None = None
    # The user cancelled this call alone (``tool_call/cancel``): the turn goes
    # on, and the result says so (set by the runner before it cancels the call).
    cancelled: bool = False

    def resolve(self, path: str) -> str:
        """``path`` made absolute (relative paths are taken from the session's cwd)."""
        return resolve(path, self.cwd)

    def __post_init__(self) -> None:
        if self.workspace is None:
            self.workspace = choose(self.capabilities)

    async def target(self, path: str, verb: str) -> Target:
        """``path`` resolved now (symlinks included) and checked: inside the
        session's directories or a path allowed for this call, not a system
        path, not a special file.  The one confinement every workspace
        operation goes through (`acp_bridge.tools.workspace`)."""
        roots, allowed = self.roots, self.allowed

        def check() -> Target:
            bounds = localfs.Bounds.of(roots, allowed)
            real = localfs.confine(path, bounds, verb)
            localfs.check_regular(real, path)
            return Target(path, real, bounds.spelled(real), bounds)

        return await on_disk(verb, path, check)

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """A text file (or the editor's unsaved buffer of it) from the session's
        workspace: the editor's ``fs/read_text_file`` when it offers it, else the
        local disk.  Either way ``path`` is resolved and checked now (`target`)."""
        assert self.workspace is not None
        return await self.workspace.read_text(self, await self.target(path, "read"), line, limit)

    async def write_text(self, path: str, content: str) -> None:
        """Write through the session's workspace (``fs/write_text_file``, or the
        local disk: atomically, in the real directory ``path`` resolves to now)."""
        assert self.workspace is not None
        await self.workspace.write_text(self, await self.target(path, "written"), content)


class LazyArgs(Generic[A]):
    """An ``args_model`` imported when it is first used: ``args_model =
    LazyArgs("ReadArgs")`` is the class ``ReadArgs`` of ``module`` (by default
    `acp_bridge.tools.arguments`, the built-in tools' models).

    The built-in tools use it so that a session can start before pydantic is
    loaded (the system prompt needs only their names and descriptions).
    """

    __slots__ = ("_model", "module", "name")

    def __init__(self, name: str, module: str = "acp_bridge.tools.arguments") -> None:
        self.name = name
        self.module = module
        self._model: type[A] | None = None

    def __get__(self, obj: object, owner: type | None = None) -> type[A]:
        model = self._model
        if model is None:
            model = self._model = cast("type[A]", getattr(import_module(self.module), self.name))
        return model


class Tool(ABC, Generic[A]):
    """One tool the model can call (see the module docstring for an example)."""

    name: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[ToolKind] = "other"
    args_model: type[A]
    # Runs in every mode without asking (it changes nothing).
    read_only: ClassVar[bool] = False

    def title(self, args: A) -> str:
        return self.name

    @property
    def rule_key(self) -> str:
        """What a remembered "always" answer for this tool is kept under: its name."""
        return self.name

    def paths(self, args: A, ctx: ToolContext) -> list[str]:
        """Absolute paths the call touches; each is checked against the session's directories."""
        return []

    def locations(self, args: A, ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": p} for p in self.paths(args, ctx)]

    @abstractmethod
    async def run(self, args: A, ctx: ToolContext) -> ToolOutput: ...
