"""Permission choices that outlive a session: "always" answers, per project.

An "allow always" or "reject always" answer is kept in the session's log
(``permission/rule``) and also here, in ``<state-dir>/permissions.json``, under
the project: the session's working directory, its real path.  A new session
whose cwd is that project starts with those rules (its own later answers win).
A rule names a tool (an MCP tool's name, ``mcp__<server>__<tool>``, names its
server and tool); it never applies to a call that touches a path outside the
session's directories (`acp_bridge.tools.permissions.decide` asks for those
every time).

The file is JSON, private to its user (0600), replaced atomically, and every
read-modify-write holds an exclusive lock on ``.permissions.lock`` beside it
(``flock``), so two bridges (two editor windows) remembering at the same
moment both keep their rule::

    {"version": 1, "projects": {"/home/me/project": {"write_file": "allow_always"}}}

Its functions do blocking file system calls: call them from a worker thread.
A file that cannot be read or parsed counts as empty (a warning says why);
one that cannot be written loses only the new rule's persistence.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any, Final

import orjson

from ..paths import make_private_dirs, read_small_file

__all__ = [
    "DECISIONS",
    "FILE_NAME",
    "forget",
    "load_all",
    "project_of",
    "remember",
    "reset",
    "rules_for",
]

log = logging.getLogger("acp_bridge.tools.rules")

FILE_NAME: Final = "permissions.json"
DECISIONS: Final = frozenset({"allow_always", "reject_always"})
VERSION: Final = 1

Rules = dict[str, str]

# One read-modify-write at a time in this process (sessions remember from
# worker threads); `_locked` adds the lock between processes.
_lock = threading.Lock()
LOCK_NAME: Final = ".permissions.lock"


@contextlib.contextmanager
def _locked(state_dir: str) -> Iterator[None]:
    """The in-process lock, then an exclusive ``flock`` on the lock file."""
    with _lock:
        make_private_dirs(state_dir)
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(os.path.join(state_dir, LOCK_NAME), flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


def path_of(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


def project_of(cwd: str) -> str:
    """The project a session belongs to: its cwd, symlinks resolved."""
    return os.path.realpath(cwd)


def load_all(state_dir: str) -> dict[str, Rules]:
    """Every project's rules (empty when there is no file, or it is unreadable)."""
    path = path_of(state_dir)
    try:
        data: Any = orjson.loads(read_small_file(path))
    except FileNotFoundError:
        return {}
    except (OSError, orjson.JSONDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else exc
        log.warning("ignoring the remembered permissions in %s: %s", path, why)
        return {}
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        log.warning("ignoring the remembered permissions in %s: no 'projects' object", path)
        return {}
    out: dict[str, Rules] = {}
    for project, rules in projects.items():
        if isinstance(project, str) and isinstance(rules, dict):
            kept = {
                tool: decision
                for tool, decision in rules.items()
                if isinstance(tool, str) and decision in DECISIONS
            }
            if kept:
                out[project] = kept
    return out


def rules_for(state_dir: str, cwd: str) -> Rules:
    """The rules of the project of ``cwd``."""
    return dict(load_all(state_dir).get(project_of(cwd), {}))


def remember(state_dir: str, cwd: str, tool: str, decision: str) -> None:
    """Keep ``decision`` for ``tool`` in the project of ``cwd``."""
    if decision not in DECISIONS:
        raise ValueError(decision)
    with _locked(state_dir):
        projects = load_all(state_dir)
        projects.setdefault(project_of(cwd), {})[tool] = decision
        _write(state_dir, projects)


def forget(state_dir: str, tool: str, project: str | None = None) -> int:
    """Drop the rules for ``tool`` (in ``project`` only, if given); how many were dropped."""
    with _locked(state_dir):
        projects = load_all(state_dir)
        dropped = 0
        for name, rules in list(projects.items()):
            if project is not None and name != project_of(project):
                continue
            if rules.pop(tool, None) is not None:
                dropped += 1
            if not rules:
                del projects[name]
        if dropped:
            _write(state_dir, projects)
        return dropped


def reset(state_dir: str) -> bool:
    """Forget every rule; whether there was a file."""
    try:
        os.unlink(path_of(state_dir))
    except FileNotFoundError:
        return False
    return True


def _write(state_dir: str, projects: dict[str, Rules]) -> None:
    make_private_dirs(state_dir)
    data = orjson.dumps(
        {"version": VERSION, "projects": projects},
        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
    )
    fd, tmp = tempfile.mkstemp(prefix=".permissions.", dir=state_dir)
    try:
        with os.fdopen(fd, "wb") as f:  # mkstemp: 0600
            f.write(data + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path_of(state_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
