"""The names the model sees: ``mcp__<server>__<tool>``.

Providers accept tool names of 1-64 characters from ``[A-Za-z0-9_-]``.  Each
part is sanitized (any other character becomes ``_``); a name longer than 64
characters is cut and ends with a short hash of the original pair.  Two
different (server, tool) pairs that would get the same name are told apart
deterministically: over the pairs sorted by (server, tool), the first keeps
the name and each later one gets its hash appended.  The same servers and
tools therefore always get the same names, whatever order they connected in.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_NAME", "PREFIX", "assign_names", "sanitize"]

PREFIX: Final = "mcp__"
MAX_NAME: Final = 64
_BAD: Final = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(part: str) -> str:
    """``part`` with every character a provider refuses replaced by ``_``."""
    return _BAD.sub("_", part) or "_"


def _hash(server: str, tool: str, salt: int) -> str:
    return hashlib.sha256(f"{server}\0{tool}\0{salt}".encode()).hexdigest()[:8]


def _fit(name: str, server: str, tool: str, *, salt: int | None) -> str:
    """``name`` if it fits and no suffix is asked for, else cut and suffixed."""
    if salt is None and len(name) <= MAX_NAME:
        return name
    tail = "_" + _hash(server, tool, salt or 0)
    return name[: MAX_NAME - len(tail)] + tail


def assign_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The model-facing name of every (server, tool) pair."""
    names: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for server, tool in sorted(set(pairs)):
        base = f"{PREFIX}{sanitize(server)}__{sanitize(tool)}"
        name = _fit(base, server, tool, salt=None)
        salt = 0
        while name in used:  # deterministic: the salt counts up
            name = _fit(base, server, tool, salt=salt)
            salt += 1
        used.add(name)
        names[(server, tool)] = name
    return names
