"""The processes a stdio MCP server started, wherever they went (Linux).

A server runs in its own process group, and the group is signalled when it
stops; but a descendant that calls ``setsid`` (a daemon, a ``setsid`` in a
shell script) leaves the group, and once its parent exits it is reparented to
init: signalling the group misses it.  So each server gets a mark in its
environment (`MARK`, a random token), which its descendants inherit, and
`find` walks ``/proc`` for every process of the server's family:

* in the server's process group;
* a descendant of the server (parent links, while the chain still stands);
* carrying the server's mark in its environment (``/proc/PID/environ``,
  readable for the user's own processes), whoever its parent is now.

Each is kept with its start time, so a PID reused by an unrelated process
before the signal is never signalled.

What cannot be found: a process that left the group, clears or rewrites its
environment, and whose parent chain to the server is broken.  Ending those too
would take a cgroup per server, which the bridge does not create.  Without
``/proc`` (macOS, BSD), only the process group is signalled.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Final

__all__ = ["MARK", "Member", "alive", "find", "new_mark", "signal_all"]

MARK: Final = "ACP_BRIDGE_MCP_SERVER"

# (pid, start time in clock ticks since boot)
Member = tuple[int, int]


def new_mark() -> str:
    return secrets.token_hex(8)


def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(ppid, pgid, start time, state) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[19]), fields[0].decode()
    except (IndexError, ValueError):
        return None


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read()
    except OSError:  # another user's process, or gone
        return False


def find(leader: int, mark: str) -> set[Member]:
    """The live members of the family of the server ``leader`` (marked ``mark``)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return set()
    needle = f"{MARK}={mark}\0".encode()
    me = os.getpid()
    stats: dict[int, tuple[int, int, int, str]] = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[3] != "Z" and pid != me:
            stats[pid] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    family: set[int] = set()
    todo = [leader]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in family:
            family.add(pid)
            todo.extend(children.get(pid, ()))
    for pid, (_, pgid, _, _) in stats.items():
        if pid not in family and (pgid == leader or _marked(pid, needle)):
            family.add(pid)
    return {(pid, stats[pid][2]) for pid in family}


def alive(member: Member) -> bool:
    """Whether ``member`` is still that process, and not a zombie."""
    st = _stat(member[0])
    return st is not None and st[2] == member[1] and st[3] != "Z"


def signal_all(members: set[Member], sig: int) -> None:
    for member in members:
        if alive(member):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member[0], sig)
