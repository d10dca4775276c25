"""Built-in search tools over the session's directories: ``find_files`` and ``search_text``.

ACP has no editor method for searching, so these read the local file system,
only under the session's ``cwd`` and additional directories, or a directory
the user allowed for the call (hidden directories such as ``.git`` and
``node_modules`` are skipped).  The walk is confined (`acp_bridge.tools.walk`):
a file whose real path leaves those directories, or leads into a system
directory, is skipped, and so is a FIFO, socket or device; the result says
what was skipped.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, Field

from . import localfs
from .base import Tool, ToolContext, ToolError, ToolOutput
from .paths import truncate
from .walk import Walk

MAX_MATCHES = 200


# Where a call's walk may go: the session's directories and the real paths the
# user allowed for the call (resolved into `localfs.Bounds` in the worker thread).
Scope = tuple[list[str], tuple[str, ...]]


def _scope(ctx: ToolContext) -> Scope:
    return list(ctx.roots), ctx.allowed


class FindArgs(BaseModel):
    pattern: str = Field(
        description="Glob matched against paths relative to the directory, e.g. '**/*.py' or '*.md'"
    )
    path: str | None = Field(
        default=None, description="Directory to search (default: all the session's directories)"
    )


class SearchArgs(BaseModel):
    pattern: str = Field(description="Regular expression (Python syntax) searched line by line")
    path: str | None = Field(
        default=None,
        description="File or directory to search (default: all the session's directories)",
    )
    glob: str | None = Field(
        default=None, description="Only files whose name matches this glob, e.g. '*.py'"
    )


# The arguments of a search: each names in ``path`` the directory (or file) to search.
S = TypeVar("S", FindArgs, SearchArgs)


class _SearchTool(Tool[S]):
    """A read-only search of ``path`` or, by default, of all the session's directories
    (which are no locations for the editor to follow)."""

    kind = "search"
    read_only = True

    def paths(self, args: S, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)] if args.path else list(ctx.roots)

    def locations(self, args: S, ctx: ToolContext) -> list[dict[str, Any]]:
        return []


class FindFiles(_SearchTool[FindArgs]):
    name = "find_files"
    description = "Find files by name (a glob pattern) in the session's directories."
    args_model = FindArgs

    def title(self, args: FindArgs) -> str:
        return f"Find {args.pattern}"

    async def run(self, args: FindArgs, ctx: ToolContext) -> ToolOutput:
        roots = self.paths(args, ctx)
        found, notes = await anyio.to_thread.run_sync(
            _find, _scope(ctx), roots, args.pattern, abandon_on_cancel=True
        )
        return _listing(found, "files", ctx, notes)


def _find(scope: Scope, roots: list[str], pattern: str) -> tuple[list[str], list[str]]:
    walk = Walk(localfs.Bounds.of(*scope))
    out: list[str] = []
    for root in roots:
        for path, _ in walk.files(root):
            rel = os.path.relpath(path, root)
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern):
                out.append(path)
                if len(out) > MAX_MATCHES:
                    return out, walk.notes()
    return out, walk.notes()


class SearchText(_SearchTool[SearchArgs]):
    name = "search_text"
    description = "Search text files in the session's directories for a regular expression."
    args_model = SearchArgs

    def title(self, args: SearchArgs) -> str:
        return f"Search for {args.pattern!r}"

    async def run(self, args: SearchArgs, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"not a valid regular expression: {exc}") from None
        roots = self.paths(args, ctx)
        found, notes = await anyio.to_thread.run_sync(
            _search, _scope(ctx), roots, regex, args.glob, abandon_on_cancel=True
        )
        return _listing(found, "matching lines", ctx, notes)


def _search(
    scope: Scope, roots: list[str], regex: re.Pattern[str], glob: str | None
) -> tuple[list[str], list[str]]:
    walk = Walk(localfs.Bounds.of(*scope))
    out: list[str] = []
    for root in roots:
        for path, real in walk.files(root):
            if glob and not fnmatch.fnmatch(os.path.basename(path), glob):
                continue
            fd = walk.open(path, real)
            if fd is None:
                continue
            try:
                with open(fd, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        if regex.search(line):
                            out.append(f"{path}:{number}: {line.rstrip()[:300]}")
                            if len(out) > MAX_MATCHES:
                                return out, walk.notes()
            except (OSError, UnicodeDecodeError):
                continue  # binary or unreadable: not a text match
    return out, walk.notes()


def _listing(found: list[str], what: str, ctx: ToolContext, notes: list[str]) -> ToolOutput:
    skipped = "".join("\n" + note for note in notes)
    if not found:
        return ToolOutput(f"No {what} found.{skipped}", raw_output={"count": 0})
    more = len(found) > MAX_MATCHES
    shown = found[:MAX_MATCHES]
    text = "\n".join(shown)
    if more:
        text += f"\n[more than {MAX_MATCHES} {what}; showing the first {MAX_MATCHES}: narrow it]"
    return ToolOutput(
        truncate(text, ctx.max_output) + skipped, raw_output={"count": len(shown), "more": more}
    )
