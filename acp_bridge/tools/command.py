"""The built-in ``run_command`` tool, through the editor's terminal.

``terminal/create`` runs ``/bin/sh -c COMMAND`` in the editor; the terminal
is embedded in the tool call so the user watches it live; the tool waits for
the exit (at most ``timeout_s``), reads the output, and always calls
``terminal/release``.  Stopped or timed out, the terminal is killed
(``terminal/kill``), its output so far is read, and that partial output is the
result, with the interruption stated.  The secret variables of the bridge's
environment (`acp_bridge.tools.secret_env`) are set empty in the command's
environment.  Without the editor's ``terminal``
capability the tool says so and runs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput
from .paths import truncate

if TYPE_CHECKING:
    from .arguments import CommandArgs

OUTPUT_BYTE_LIMIT = 256 * 1024


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
        if not ctx.capabilities.terminal:
            raise ToolError(
                "the editor offers no terminal (it did not advertise the terminal capability), "
                "so commands cannot be run in this session"
            )
        cwd = ctx.resolve(args.cwd) if args.cwd else ctx.cwd
        limit = min(args.timeout_s or ctx.timeout_s, ctx.timeout_s)
        created = await ctx.settle(
            "terminal/create",
            {
                "sessionId": ctx.session_id,
                "command": "/bin/sh",
                "args": ["-c", args.command],
                "env": [{"name": name, "value": ""} for name in ctx.hidden_env],
                "cwd": cwd,
                "outputByteLimit": OUTPUT_BYTE_LIMIT,
            },
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            raise ToolError("the editor did not return a terminal id")
        ids = {"sessionId": ctx.session_id, "terminalId": terminal_id}
        embed = {"type": "terminal", "terminalId": terminal_id}
        ctx.update({"content": [embed]})
        try:
            try:
                with anyio.move_on_after(limit) as waited:
                    await ctx.request("terminal/wait_for_exit", ids)
                if waited.cancelled_caught:
                    await ctx.request("terminal/kill", ids)
                    out = await ctx.request("terminal/output", ids)
                    why = f"timed out after {limit:g} s: the command was killed"
                    return _result(args.command, out, embed, ctx, why)
                out = await ctx.request("terminal/output", ids)
                return _result(args.command, out, embed, ctx, None)
            except anyio.get_cancelled_exc_class():
                # Stopped: kill the command and keep what it printed.
                why = "interrupted by the user: the command was killed"
                unread = why + "; its output could not be read"
                ctx.partial = _result(args.command, None, embed, ctx, unread)
                await ctx.cleanup("terminal/kill", ids)
                out = await ctx.cleanup("terminal/output", ids)
                if out is not None:
                    ctx.partial = _result(args.command, out, embed, ctx, why)
                raise
        finally:
            await ctx.cleanup("terminal/release", ids)


def _result(
    command: str, out: Any, embed: dict[str, Any], ctx: ToolContext, interruption: str | None
) -> ToolOutput:
    output = out.get("output", "") if isinstance(out, dict) else ""
    output = output if isinstance(output, str) else ""
    status = out.get("exitStatus") if isinstance(out, dict) else None
    code = status.get("exitCode") if isinstance(status, dict) else None
    signal = status.get("signal") if isinstance(status, dict) else None
    lines = [f"$ {command}", truncate(output, ctx.max_output).rstrip("\n")]
    if isinstance(out, dict) and out.get("truncated") is True:
        kept = OUTPUT_BYTE_LIMIT
        lines.append(f"[output truncated by the terminal: only the last {kept} bytes were kept]")
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
        content=[embed],
        raw_output={
            "exitCode": code,
            "signal": signal,
            "interrupted": interruption is not None,
            "output_chars": len(output),
        },
    )
