"""acp-bridge with a tool of your own.

Run it exactly like ``acp-bridge`` (same options), e.g. in Zed's
``agent_servers``: ``"command": "/path/to/venv/bin/python", "args":
["/path/to/custom_tool.py", "--provider", "anthropic"]``.  The model can then
call ``count_lines`` besides the built-in tools.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from acp_bridge.cli import main
from acp_bridge.tools import TOOLS, Tool, ToolContext, ToolError, ToolOutput


class CountLinesArgs(BaseModel):
    path: str = Field(description="Absolute path of a text file")


class CountLines(Tool[CountLinesArgs]):
    name = "count_lines"
    description = "Count the lines of a text file."
    kind = "read"  # the ACP ToolKind the editor shows
    args_model = CountLinesArgs
    read_only = True  # changes nothing: runs in every mode without asking

    def title(self, args: CountLinesArgs) -> str:
        return f"Count lines of {args.path}"

    def paths(self, args: CountLinesArgs, ctx: ToolContext) -> list[str]:
        # Checked against the session's directories (outside: the user is asked).
        return [ctx.resolve(args.path)]

    async def run(self, args: CountLinesArgs, ctx: ToolContext) -> ToolOutput:
        # Through the editor's fs/read_text_file when it offers it (unsaved
        # buffers included), else from the disk.
        text = await ctx.read_text(ctx.resolve(args.path))
        if not text:
            raise ToolError(f"{args.path} is empty")  # the message becomes the result
        count = text.count("\n") + (not text.endswith("\n"))
        return ToolOutput(f"{count} lines", raw_output={"lines": count})


TOOLS.register(CountLines())

if __name__ == "__main__":
    sys.exit(main())
