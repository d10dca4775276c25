"""Built-in file tools: ``read_file``, ``write_file`` and ``edit_file``.

They go through the editor (``fs/read_text_file``, ``fs/write_text_file``,
which see unsaved buffers) when it advertised those capabilities in
``initialize``, and through the local file system otherwise; either way the
path is resolved and checked when it is used (`ToolContext.read_text`).
Writes and edits carry a ``diff`` in their tool call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..jsonrpc.errors import RemoteError
from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput
from .paths import truncate

if TYPE_CHECKING:
    from .arguments import EditArgs, ReadArgs, WriteArgs


class ReadFile(Tool["ReadArgs"]):
    name = "read_file"
    description = (
        "Read a text file, including unsaved changes open in the editor. "
        "Use line and limit to read part of a large file."
    )
    kind = "read"
    args_model = LazyArgs["ReadArgs"]("ReadArgs")
    read_only = True

    def title(self, args: ReadArgs) -> str:
        return f"Read {args.path}"

    def paths(self, args: ReadArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)]

    def locations(self, args: ReadArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        loc: dict[str, Any] = {"path": ctx.resolve(args.path)}
        if args.line is not None:
            loc["line"] = args.line
        return [loc]

    async def run(self, args: ReadArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        text = await ctx.read_text(path, args.line, args.limit)
        shown = truncate(text, ctx.max_output)
        return ToolOutput(
            shown, raw_output={"path": path, "chars": len(text), "truncated": shown != text}
        )


async def _current(ctx: ToolContext, path: str) -> str | None:
    """The file's current text, or None when it does not exist (or cannot be read)."""
    try:
        return await ctx.read_text(path)
    except (ToolError, RemoteError):
        return None


def _diff(path: str, old: str | None, new: str) -> dict[str, Any]:
    return {"type": "diff", "path": path, "oldText": old, "newText": new}


class WriteFile(Tool["WriteArgs"]):
    name = "write_file"
    description = "Create a text file or replace its whole content."
    kind = "edit"
    args_model = LazyArgs["WriteArgs"]("WriteArgs")

    def title(self, args: WriteArgs) -> str:
        return f"Write {args.path}"

    def paths(self, args: WriteArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)]

    async def run(self, args: WriteArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        old = await _current(ctx, path)
        await ctx.write_text(path, args.content)
        verb = "Created" if old is None else "Wrote"
        return ToolOutput(
            f"{verb} {path} ({len(args.content)} characters).",
            content=[_diff(path, old, args.content)],
            raw_output={"path": path, "created": old is None},
        )


class EditFile(Tool["EditArgs"]):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of old_text with new_text in a text file. "
        "old_text must match the file exactly once; include surrounding lines to make it unique."
    )
    kind = "edit"
    args_model = LazyArgs["EditArgs"]("EditArgs")

    def title(self, args: EditArgs) -> str:
        return f"Edit {args.path}"

    def paths(self, args: EditArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)]

    async def run(self, args: EditArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.resolve(args.path)
        if not args.old_text:
            raise ToolError("old_text is empty; use write_file to create a file")
        old = await ctx.read_text(path)
        count = old.count(args.old_text)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise ToolError(f"old_text {where} in {path}; nothing was changed")
        new = old.replace(args.old_text, args.new_text, 1)
        await ctx.write_text(path, new)
        line = old[: old.index(args.old_text)].count("\n") + 1
        return ToolOutput(
            f"Edited {path} at line {line}.",
            content=[_diff(path, old, new)],
            raw_output={"path": path, "line": line},
        )
