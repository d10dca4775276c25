"""The ``[[mcp_servers]]`` entries of the config file, as the file holds them.

Read here for both their readers: the hub (`acp_bridge.mcp.hub`), which
validates each entry, and the start-up's front door (`acp_bridge.front_door`),
which only needs to know whether there are any, before the event loop is
imported (nothing here imports it).
"""

from __future__ import annotations

import os

__all__ = ["configured_entries"]


def configured_entries(path: str) -> object:
    """The file's ``mcp_servers`` value (``[]`` when the file does not exist or
    lists none); raises OSError or ``tomllib.TOMLDecodeError`` when it cannot
    be read (a special file, one over `acp_bridge.paths.SMALL_FILE_LIMIT`)."""
    if not os.path.isfile(path):
        return []  # no config file: nothing to parse (tomllib compiles regexes at import)
    import tomllib

    from ..paths import read_small_file

    data = tomllib.loads(read_small_file(path).decode())
    entries: object = data.get("mcp_servers", [])
    return entries
