"""The built-in ``run_command`` tool, through the session's workspace.

The workspace (`acp_bridge.tools.workspace`) runs ``/bin/sh -c COMMAND``: in
the editor's terminal (``terminal/create``, embedded in the tool call so the
user watches it live), or as a local process.  The tool waits for the exit (at
most ``timeout_s``), reads the output, and always releases the terminal.
Stopped or timed out, the command is killed, its output so far is read, and
that partial output is the result, with the interruption stated; so for a
command the user cancelled alone (``tool_call/cancel``, or ``terminal/cancel``
for its terminal), after which the turn goes on.  The secret
variables of the bridge's environment (`acp_bridge.tools.secret_env`) are set
empty in the command's environment.  An ACP v1 editor without the
``terminal`` capability gets no command run: the tool says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from .base import LazyArgs, Tool, ToolContext, ToolOutput
from .paths import truncate
from .workspace import OUTPUT_BYTE_LIMIT, CommandOutput

if TYPE_CHECKING:
    from .arguments import CommandArgs


class RunCommand(Tool["CommandArgs"]):
    name = "run_command"
    description = (
        "Run a shell command in the editor's terminal and return its output and exit status."
    )
    kind = "execute"
    args_model = LazyArgs["CommandArgs"]("CommandArgs")

    def title(self, args: CommandArgs) -> str:
        return f"Run `{args.command}`"

    def paths(self, args: CommandArgs, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.cwd)] if args.cwd else []

    def locations(self, args: CommandArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        return []

    async def run(self, args: CommandArgs, ctx: ToolContext) -> ToolOutput:
        assert ctx.workspace is not None
        cwd = ctx.resolve(args.cwd) if args.cwd else ctx.cwd
        limit = min(args.timeout_s or ctx.timeout_s, ctx.timeout_s)
        terminal = await ctx.workspace.start_command(ctx, args.command, cwd)
        embed = terminal.content
        if embed:
            ctx.update({"content": embed})
        try:
            try:
                with anyio.move_on_after(limit) as waited:
                    await terminal.wait()
                if waited.cancelled_caught:
                    await terminal.kill()
                    out = await terminal.output()
                    why = f"timed out after {limit:g} s: the command was killed"
                    return _result(args.command, out, embed, ctx, why)
                return _result(args.command, await terminal.output(), embed, ctx, None)
            except anyio.get_cancelled_exc_class():
                # Stopped, or this call cancelled: kill the command and keep what it printed.
                why = f"{_by_user(ctx.cancelled)}: the command was killed"
                unread = why + "; its output could not be read"
                ctx.partial = _result(args.command, CommandOutput(), embed, ctx, unread)
                stopped = await terminal.stop()
                if stopped is not None:
                    ctx.partial = _result(args.command, stopped, embed, ctx, why)
                raise
        finally:
            await terminal.release()


def _by_user(alone: bool) -> str:
    """Who interrupted a command: the user's Stop, or the user's cancel of it alone."""
    return "cancelled by the user (the turn went on)" if alone else "interrupted by the user"


def _result(
    command: str,
    out: CommandOutput,
    embed: list[dict[str, Any]],
    ctx: ToolContext,
    interruption: str | None,
) -> ToolOutput:
    output, code, signal = out.output, out.exit_code, out.signal
    lines = [f"$ {command}", truncate(output, ctx.max_output).rstrip("\n")]
    if out.truncated:
        kept = OUTPUT_BYTE_LIMIT
        lines.append(f"[output truncated by the terminal: only the last {kept} bytes were kept]")
    if interruption is None and ctx.live is not None and ctx.live.cancelled:  # terminal/cancel
        interruption = f"{_by_user(True)}: the command was killed"
    if interruption is not None:
        lines.append(f"[{interruption}; the output above is what it printed before]")
    elif signal:
        lines.append(f"[killed by signal {signal}]")
    else:
        lines.append(f"[exit code {code}]")
    failed = interruption is not None or (code not in (0, None)) or bool(signal)
    return ToolOutput(
        "\n".join(line for line in lines if line),
        is_error=failed,
        content=list(embed),
        raw_output={
            "exitCode": code,
            "signal": signal,
            "interrupted": interruption is not None,
            "output_chars": len(output),
        },
    )
