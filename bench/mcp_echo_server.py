"""The smallest stdio MCP server, for ``bench/mcp_startup.py``: one tool, ``echo``.

    python bench/mcp_echo_server.py

Built with the official ``mcp`` package the same way as ``tests/mcp_server.py``.
"""

# No `from __future__ import annotations`: the tool's annotations are read at run time.


def main() -> None:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("bench-echo")

    # Read-only: the bridge runs it without asking (the benchmark's G calls it).
    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    server.run()


if __name__ == "__main__":
    main()
