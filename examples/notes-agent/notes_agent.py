"""notes-agent: acp-bridge with two tools of its own.

``count_words`` reads a file (read-only: it runs without asking);
``add_note`` appends a line to NOTES.md in the session's folder (an edit: the
user is asked first).  Run it like ``acp-bridge`` (same options), e.g. from an
editor: ``python notes_agent.py --provider anthropic``, or keyless on a script:
``python notes_agent.py --provider fake --script sessions/add-note.json``.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from acp_bridge.cli import main
from acp_bridge.tools import TOOLS, Tool, ToolContext, ToolError, ToolOutput

NOTES = "NOTES.md"


class CountWordsArgs(BaseModel):
    path: str = Field(description="Path of a text file (relative to the project)")


class CountWords(Tool[CountWordsArgs]):
    name = "count_words"
    description = "Count the words of a text file."
    kind = "read"
    args_model = CountWordsArgs
    read_only = True

    def title(self, args: CountWordsArgs) -> str:
        return f"Count the words of {args.path}"

    def paths(self, args: CountWordsArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)]

    async def run(self, args: CountWordsArgs, ctx: ToolContext) -> ToolOutput:
        text = await ctx.read_text(ctx.resolve(args.path))
        words = len(text.split())
        return ToolOutput(f"{words} words", raw_output={"words": words})


class AddNoteArgs(BaseModel):
    text: str = Field(description="The note, one line")


class AddNote(Tool[AddNoteArgs]):
    name = "add_note"
    description = f"Append a note to {NOTES} in the project."
    kind = "edit"
    args_model = AddNoteArgs

    def title(self, args: AddNoteArgs) -> str:
        return f"Add a note: {args.text}"

    def paths(self, args: AddNoteArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(NOTES)]

    async def run(self, args: AddNoteArgs, ctx: ToolContext) -> ToolOutput:
        if "\n" in args.text:
            raise ToolError("a note is one line")
        path = ctx.resolve(NOTES)
        try:
            old = await ctx.read_text(path)
        except Exception:
            old = ""
        await ctx.write_text(path, f"{old}- {args.text}\n")
        return ToolOutput(f"noted in {NOTES}")


TOOLS.register(CountWords())
TOOLS.register(AddNote())

if __name__ == "__main__":
    sys.exit(main())
