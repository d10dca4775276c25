"""MCP server entries: ACP's ``McpServer`` shapes, checked, and the two lists merged.

An entry is one of (as ACP's schema has them)::

    {"name": "git", "command": "uvx", "args": ["mcp-server-git"],
     "env": [{"name": "GIT_DIR", "value": "/repo/.git"}]}            # stdio
    {"type": "http", "name": "docs", "url": "https://...",
     "headers": [{"name": "Authorization", "value": "Bearer ..."}]}  # streamable HTTP
    {"type": "sse", "name": "old", "url": "https://...", "headers": []}

The config file's ``[[mcp_servers]]`` tables have the same keys; there
``env`` and ``headers`` may also be written as a table
(``env = { GIT_DIR = "/repo/.git" }``).  A missing ``args``, ``env`` or
``headers`` is taken as empty.

The editor's servers and the configured ones are merged: a configured server
whose name the editor also uses is left out (the editor's entry wins), and
that is said on stderr.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["TRANSPORTS", "ServerSpec", "SpecError", "merge", "parse_server", "parse_servers"]

Transport = Literal["stdio", "http", "sse"]
TRANSPORTS: Final[tuple[Transport, ...]] = ("stdio", "http", "sse")


class SpecError(ValueError):
    """An entry that cannot work: ``field`` names where, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ServerSpec:
    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    # "editor" (mcpServers) or "config" (the config file).
    origin: str = "editor"

    def describe(self) -> str:
        """How the server is reached, without secrets (no env, no headers)."""
        return self.command if self.transport == "stdio" else self.url

    def secrets(self) -> tuple[list[str], list[str]]:
        """The values of its ``env`` and ``headers``, all secrets: (those
        redacted whole, those redacted by their parts too).  A header's value
        (``Bearer <token>``) and a variable named like a secret
        (`acp_bridge.tools.secret_env.is_secret`) count by parts; any other
        variable's value (a path, say) only whole, so that its pieces (a
        folder's name) stay readable."""
        from ..tools.secret_env import is_secret

        whole = [value for name, value in self.env if not is_secret(name, value)]
        split = [value for name, value in self.env if is_secret(name, value)]
        return whole, split + [value for _, value in self.headers]


def _pairs(value: Any, field: str, *, lenient: bool) -> tuple[tuple[str, str], ...]:
    if value is None and lenient:
        return ()
    if lenient and isinstance(value, Mapping):
        items = list(value.items())
        for key, val in items:
            if not isinstance(val, str):
                raise SpecError(f"{field}.{key}", "must be a string")
        return tuple((str(k), v) for k, v in items)
    if not isinstance(value, list):
        raise SpecError(field, "must be an array of {name, value} objects")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise SpecError(where, "must be an object with name and value")
        name, val = item.get("name"), item.get("value")
        if not isinstance(name, str) or not name:
            raise SpecError(f"{where}.name", "must be a non-empty string")
        if not isinstance(val, str):
            raise SpecError(f"{where}.value", "must be a string")
        out.append((name, val))
    return tuple(out)


def parse_server(entry: Any, where: str, *, origin: str = "editor") -> ServerSpec:
    """One entry, checked; ``where`` prefixes the field names of errors
    (``mcpServers[0]``).  A missing list is taken as empty; the config file's
    entries (``origin="config"``) may also give ``env`` and ``headers`` as tables."""
    lenient = origin != "editor"
    if not isinstance(entry, Mapping):
        raise SpecError(where, "must be an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{where}.name", "must be a non-empty string")
    kind = entry.get("type", "stdio")
    if kind not in TRANSPORTS:
        raise SpecError(f"{where}.type", f"must be one of {', '.join(TRANSPORTS)}")
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise SpecError(f"{where}.command", "must be a non-empty string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise SpecError(f"{where}.args", "must be an array of strings")
        env = _pairs(entry.get("env", []), f"{where}.env", lenient=lenient)
        return ServerSpec(name, "stdio", command=command, args=tuple(args), env=env, origin=origin)
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise SpecError(f"{where}.url", "must be an http:// or https:// URL")
    headers = _pairs(entry.get("headers", []), f"{where}.headers", lenient=lenient)
    return ServerSpec(name, kind, url=url, headers=headers, origin=origin)


def parse_servers(entries: Sequence[Any], prefix: str, *, origin: str) -> list[ServerSpec]:
    return [parse_server(e, f"{prefix}[{i}]", origin=origin) for i, e in enumerate(entries)]


def merge(
    editor: Sequence[ServerSpec], configured: Sequence[ServerSpec]
) -> tuple[list[ServerSpec], list[str]]:
    """The servers of a session, and what to say on stderr about the merge.

    Editor entries come first, in their order; a later entry with a name
    already taken is left out (for the editor's own list: the first wins)."""
    out: list[ServerSpec] = []
    notes: list[str] = []
    taken: dict[str, ServerSpec] = {}
    for spec in [*editor, *configured]:
        first = taken.get(spec.name)
        if first is None:
            taken[spec.name] = spec
            out.append(spec)
        elif spec.origin == "config" and first.origin == "editor":
            notes.append(
                f"MCP server {spec.name!r} of the config file is left out: "
                "the editor passes a server of the same name, which is used instead"
            )
        else:
            notes.append(f"MCP server {spec.name!r} is listed twice; the first entry is used")
    return out, notes
