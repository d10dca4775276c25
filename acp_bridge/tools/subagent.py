"""``task``: the model hands a self-contained task to a subagent, a child session.

The child has its own model context, tools and log (beside the parent's,
linked both ways); it runs one turn on the task's prompt, and its final
answer is this call's result.  How a child is made and run belongs to the
protocol edge (`acp_bridge.acp.subagents`): the tool reaches it through
``ctx.subagents`` (None: a session that may not start children, e.g. a child
itself, so the depth stays one level).

A Stop of the parent stops the child first (its delivered prefix kept as its
interrupted message), and this call's result is what the child had said.
The tool changes nothing itself (the child's own tools ask as usual), so it
runs in every mode without a permission prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from .arguments import TaskArgs

__all__ = ["NAME", "SubagentHost", "Task"]

NAME: Final = "task"


class SubagentHost(Protocol):
    """What starts and runs a child session for one parent session."""

    async def run(self, ctx: ToolContext, description: str, prompt: str) -> ToolOutput: ...


class Task(Tool["TaskArgs"]):
    name = NAME
    description = (
        "Hand a self-contained task (explore the code base, review a diff) to a subagent with "
        "its own context and tools; its final answer is the result. Write the prompt so that it "
        "stands alone: the subagent sees nothing else of this conversation."
    )
    kind = "other"
    args_model = LazyArgs["TaskArgs"]("TaskArgs")
    read_only = True

    def title(self, args: TaskArgs) -> str:
        return f"Subagent: {args.description}"

    async def run(self, args: TaskArgs, ctx: ToolContext) -> ToolOutput:
        host: Any = ctx.subagents
        if host is None:
            raise ToolError("this session cannot start subagents")
        output: ToolOutput = await host.run(ctx, args.description, args.prompt)
        return output
