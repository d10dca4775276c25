"""A small MCP server for the tests, built with the official ``mcp`` package.

    python tests/mcp_server.py [--record FILE] [--tools N] [--http PORT] [--name NAME]
                               [--deep-schema N]
    python tests/mcp_server.py --mute      # reads its stdin, never answers anything
    python tests/mcp_server.py --stubborn  # a server that ignores EOF and SIGTERM, with a child
    python tests/mcp_server.py --setsid-child  # starts a child that leaves its session and group
    python tests/mcp_server.py --raw MODE  # written by hand, without the mcp package:
        pings        sends ping requests for ever and never reads its stdin
        bad-answer   answers every tools/call with a line that is not valid JSON-RPC

Tools: ``echo`` (read-only), ``note`` (destructive: it changes things),
``picture`` (an image and a resource link), ``wait`` (runs until cancelled,
reporting progress first), ``crash`` (the process dies), ``grow`` (adds a
tool and sends ``notifications/tools/list_changed``), ``env`` (one
variable of its environment), ``shout`` (lines on its stderr); with
``--tools N`` also ``t0`` .. ``tN-1``; with ``--deep-schema N`` also
``deep``, whose input schema nests N levels.

``--record FILE`` appends one JSON line per event the tests look for:
``{"event": "started", "tool": ...}`` and ``{"event": "cancelled", ...}``
when a call was cancelled by the client's ``notifications/cancelled``, and
``{"event": "exit"}`` when the process leaves normally.
"""

# No `from __future__ import annotations`: the tools' annotations are read at run time.

import argparse
import atexit
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def _record(path: str | None, **event: object) -> None:
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({**event, "pid": os.getpid()}) + "\n")


def mute() -> None:
    """Never answers initialize (nor anything): reads until EOF."""
    for _ in sys.stdin.buffer:
        pass


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def raw(mode: str, record: str | None) -> None:
    """A server written by hand, to misbehave where the mcp package would not."""
    _record(record, event="started-raw", mode=mode)
    if mode == "pings":
        ping = (json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}) + "\n").encode()
        block = ping * 1000
        try:
            while True:
                sys.stdout.buffer.write(block)
                sys.stdout.buffer.flush()
        except BrokenPipeError:
            return
    tool = {"name": "echo", "description": "Say it back.", "inputSchema": {"type": "object"}}
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            info = {"name": "raw", "version": "1"}
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}
            _send({"jsonrpc": "2.0", "id": rid, "result": {**result, "serverInfo": info}})
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}})
        elif method == "tools/call":
            _record(record, event="started", tool="echo")
            _send({"jsonrpc": "2.0", "id": rid, "result": "not an object"})
        elif rid is not None:
            _send({"jsonrpc": "2.0", "id": rid, "result": {}})


def shout(lines: int) -> str:
    """Write numbered lines to stderr."""
    for i in range(lines):
        sys.stderr.write(f"shout line {i} " + "x" * 80 + "\n")
    sys.stderr.flush()
    return "shouted"


def _be_stubborn(record: str | None) -> None:
    """Ignore SIGTERM and have a child of its own; `main` then outlives its
    stdin's EOF: only SIGKILL to the process group ends them."""
    import signal
    import subprocess

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "600"])
    _record(record, event="started-stubborn", child=child.pid)


def _start_setsid_child(record: str | None) -> None:
    """A child in a session (and process group) of its own, as a daemon's."""
    import subprocess

    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    _record(record, event="started-setsid", child=child.pid)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--http", type=int)
    parser.add_argument("--name", default="test-server")
    parser.add_argument("--mute", action="store_true")
    parser.add_argument("--stubborn", action="store_true")
    parser.add_argument("--deep-schema", type=int, default=0)
    parser.add_argument("--raw", choices=["pings", "bad-answer"])
    parser.add_argument("--setsid-child", action="store_true")
    opts = parser.parse_args()
    if opts.setsid_child:
        _start_setsid_child(opts.record)
    if opts.raw:
        raw(opts.raw, opts.record)
        return
    if opts.stubborn:
        _be_stubborn(opts.record)
    if opts.mute:
        _record(opts.record, event="started-mute")
        mute()
        return
    serve(opts)


def _add_grow(server: "MCPServer") -> None:
    """The tool ``grow``, which adds ``later`` and says the list changed; the
    list is then slow to come, so a client must wait for it."""
    import anyio
    from mcp.server.mcpserver import Context

    grown: list[bool] = []
    listed = server.list_tools

    async def list_tools() -> Any:
        if grown:  # slow to list once grown: the client must wait for the new list
            await anyio.sleep(0.5)
        return await listed()

    server.list_tools = list_tools  # type: ignore[method-assign]

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool ``later``."""

        def later() -> str:
            """Added later."""
            return "later"

        server.add_tool(later, name="later")
        grown.append(True)
        await ctx.session.send_tool_list_changed()
        return "grown"


def _add_deep(server: "MCPServer", levels: int) -> None:
    """The tool ``deep``, listed with an input schema nested ``levels`` deep."""
    from mcp_types import Tool

    inner: dict[str, Any] = {"type": "integer"}
    for _ in range(levels - 3):
        inner = {"type": "array", "items": inner}
    schema = {"type": "object", "properties": {"x": inner}}
    listed = server.list_tools

    async def list_tools() -> Any:
        return [*(await listed()), Tool(name="deep", description="Deep.", input_schema=schema)]

    server.list_tools = list_tools  # type: ignore[method-assign]


def serve(opts: argparse.Namespace) -> None:
    record = opts.record

    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import ImageContent, ResourceLink, TextContent, ToolAnnotations

    atexit.register(lambda: _record(record, event="exit"))
    server = MCPServer(opts.name)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Say the text back."""
        _record(record, event="started", tool="echo", text=text)
        return f"echo: {text}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def note(text: str) -> str:
        """Write a note."""
        _record(record, event="started", tool="note", text=text)
        return f"noted: {text}"

    @server.tool()
    def picture() -> list[ImageContent | ResourceLink | TextContent]:
        """An image, a link and a caption."""
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            ResourceLink(type="resource_link", uri="file:///tmp/dot.png", name="dot.png"),
        ]

    @server.tool()
    async def wait(ctx: Context) -> str:
        """Run until cancelled."""
        await ctx.report_progress(1, 10, "one tenth done")
        await anyio.sleep(0.3)  # the notification reaches the client before the record
        _record(record, event="started", tool="wait", request_id=str(ctx.request_id))
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            _record(record, event="cancelled", tool="wait", request_id=str(ctx.request_id))
            raise
        return "finished"

    @server.tool()
    def crash() -> str:
        """Die."""
        _record(record, event="crash")
        os._exit(3)

    _add_grow(server)

    @server.tool()
    def env(var: str) -> str:
        """One variable of the environment."""
        return os.environ.get(var, "<unset>")

    server.add_tool(shout)
    for i in range(opts.tools):

        def numbered(x: int = 0, i: int = i) -> str:
            return f"t{i}: {x}"

        server.add_tool(numbered, name=f"t{i}", description=f"Numbered tool {i}.")

    if opts.deep_schema:
        _add_deep(server, opts.deep_schema)
    _record(record, event="up", at=time.time())
    if opts.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=opts.http)
    else:
        server.run()
    if opts.stubborn:
        time.sleep(600)


if __name__ == "__main__":
    main()
