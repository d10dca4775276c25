"""MCP servers of a session: their tools offered to the model beside the built-in ones.

The editor passes servers in ``mcpServers`` (``session/new``, ``load``,
``resume``, ``fork``); the config file may list more (``[[mcp_servers]]``).  Nothing
here imports the ``mcp`` package until a session has a server, so a bridge
without MCP servers starts as fast as before.

* `specs`: the server entries, validated, and the editor's merged with the
  configured ones;
* `naming`: ``mcp__<server>__<tool>`` names that every provider accepts;
* `content`: an MCP tool result as the model's text and the editor's content;
* `stdio`: the stdio transport (spawn, bounded stderr, EOF/SIGTERM/SIGKILL);
* `handshake`: a stdio connection's start, before the ``mcp`` package is loaded;
* `link`: one connection to one server, for the session's lifetime;
* `servers`: the connections of one session, their tools and what to report;
* `tool`: an MCP tool as a bridge `Tool`, and the session's tool registry;
* `hub`: the agent's entry points (start, answer, close).
"""
