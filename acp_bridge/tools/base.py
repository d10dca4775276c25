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
`ToolContext.read_text`/`write_text` which use the editor when it offers file
access and the local file system otherwise; both resolve the path again when
they use it and refuse it unless it still lies in the session's directories
or in a path allowed for the call (`acp_bridge.tools.localfs`).  A tool that
can give a real partial result when it is stopped (a command's output so
far) sets ``ctx.partial`` before re-raising the cancellation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, cast

import anyio
import anyio.to_thread

from . import localfs
from .paths import resolve

if TYPE_CHECKING:
    from pydantic import BaseModel

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]

A = TypeVar("A", bound="BaseModel")
R = TypeVar("R")


class ToolError(Exception):
    """A tool failed in a way the model should read (its message is the result)."""


@dataclass
class ToolOutput:
    """A tool's result.  ``text`` goes back to the model; ``content`` is extra
    ACP tool-call content for the editor (a diff, a terminal); ``raw_output``
    is the ``rawOutput`` of the final update."""

    text: str
    is_error: bool = False
    content: list[dict[str, Any]] = field(default_factory=list)
    raw_output: dict[str, Any] | None = None


EditorRequest = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass
class ClientCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    # ``elicitation.form``: the editor shows form questions (`acp_bridge.tools.ask_user`).
    elicitation_form: bool = False

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
    # Starts child sessions (`acp_bridge.tools.subagent.SubagentHost`); None: none.
    subagents: Any = None

    def resolve(self, path: str) -> str:
        """``path`` made absolute (relative paths are taken from the session's cwd)."""
        return resolve(path, self.cwd)

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """A text file (or the editor's unsaved buffer of it) through ``fs/read_text_file``
        when the editor offers it, else from the local disk.

        Either way ``path`` is resolved now (symlinks included) and must lie in
        the session's directories or in a path allowed for this call; the
        editor is sent the resolved path (`acp_bridge.tools.localfs`)."""
        if self.capabilities.read_text_file:
            params: dict[str, Any] = {
                "sessionId": self.session_id,
                "path": await self._confined(path, "read"),
            }
            if line is not None:
                params["line"] = line
            if limit is not None:
                params["limit"] = limit
            result = await self.request("fs/read_text_file", params)
            content = result.get("content") if isinstance(result, dict) else None
            if not isinstance(content, str):
                raise ToolError(f"the editor returned no content for {path}")
            return content
        roots, allowed = self.roots, self.allowed

        def read() -> str:
            return localfs.read_text(path, localfs.Bounds.of(roots, allowed), line, limit)

        return await _on_disk("read", path, read)

    async def write_text(self, path: str, content: str) -> None:
        """Write through ``fs/write_text_file`` if the editor offers it, else to the
        local disk: atomically, in the real directory ``path`` resolves to now."""
        if self.capabilities.write_text_file:
            target = await self._confined(path, "written")
            await self.settle(
                "fs/write_text_file",
                {"sessionId": self.session_id, "path": target, "content": content},
            )
            return
        roots, allowed = self.roots, self.allowed

        def write() -> None:
            localfs.write_text(path, localfs.Bounds.of(roots, allowed), content)

        try:
            await _on_disk("write", path, write)
        except anyio.get_cancelled_exc_class():
            # Left to its worker thread: the rename may still happen.
            self.partial = ToolOutput(
                f"The user stopped the turn while {path} was being written: it holds "
                "either its old content or all of the new one.",
                is_error=True,
            )
            raise

    async def _confined(self, path: str, verb: str) -> str:
        """``path`` resolved and checked now, spelled from its root as the session names it."""
        roots, allowed = self.roots, self.allowed

        def check() -> str:
            bounds = localfs.Bounds.of(roots, allowed)
            real = localfs.confine(path, bounds, verb)
            localfs.check_regular(real, path)
            return bounds.spelled(real)

        return await _on_disk(verb, path, check)


async def _on_disk(verb: str, path: str, work: Callable[[], R]) -> R:
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
