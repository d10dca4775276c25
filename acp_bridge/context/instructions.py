"""The instruction files a session's system prompt includes.

In order (the more specific last, so it wins a conflict):

1. the user's own file, ``AGENTS.md`` in the config directory
   (``$ACP_BRIDGE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/acp-bridge``, else
   ``~/.config/acp-bridge``);
2. the project's: in the repository root (the nearest parent of the session's
   cwd holding ``.git``), then in each directory below it down to the cwd,
   ``AGENTS.md``, or ``CLAUDE.md`` where a directory has no ``AGENTS.md``.
   Outside a repository, the cwd only.

Each file is read up to `FILE_LIMIT` bytes, and all of them up to
`TOTAL_LIMIT`; a cut file says so where it is cut.  Only regular files are
read (a FIFO or a device named AGENTS.md is skipped), never following the
path outside what ``open`` resolves.  This is blocking I/O: run it in a
worker thread (`acp_bridge.context.state`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Final

from .. import paths

__all__ = [
    "FILE_LIMIT",
    "TOTAL_LIMIT",
    "Instructions",
    "find_instructions",
    "read_instructions",
]

NAMES: Final = ("AGENTS.md", "CLAUDE.md")
FILE_LIMIT: Final = 32 * 1024
TOTAL_LIMIT: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Instructions:
    path: str
    text: str
    # The file's size when it was cut (None: included whole).
    cut_from: int | None = None
    user: bool = False  # the user's own file (not the project's)


def find_instructions(cwd: str, config_dir: str | None = None) -> list[tuple[str, bool]]:
    """The instruction files for a session in ``cwd``: ``(path, is_user_file)``, in order."""
    found: list[tuple[str, bool]] = []
    user_file = os.path.join(config_dir or paths.config_dir(), NAMES[0])
    if _is_regular(user_file):
        found.append((user_file, True))
    for directory in _project_dirs(os.path.abspath(cwd)):
        for name in NAMES:
            path = os.path.join(directory, name)
            if _is_regular(path):
                found.append((path, False))
                break
    return found


def read_instructions(cwd: str, config_dir: str | None = None) -> list[Instructions]:
    """The instruction files of `find_instructions`, read within the limits."""
    out: list[Instructions] = []
    left = TOTAL_LIMIT
    for path, user in find_instructions(cwd, config_dir):
        if left <= 0:
            break
        read = _read(path, min(FILE_LIMIT, left))
        if read is None:
            continue
        text, size = read
        left -= len(text.encode("utf-8"))
        cut = size if size > len(text.encode("utf-8")) else None
        if text.strip() or cut:
            out.append(Instructions(path, text, cut, user))
    return out


def _project_dirs(cwd: str) -> list[str]:
    """The repository root, then each directory below it down to ``cwd``."""
    chain = [cwd]
    directory = cwd
    while not os.path.exists(os.path.join(directory, ".git")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return [cwd]  # not in a repository: the cwd only
        directory = parent
        chain.append(directory)
    return list(reversed(chain))


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _read(path: str, limit: int) -> tuple[str, int] | None:
    """Up to ``limit`` bytes of a regular file as text, and the file's size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None  # replaced by something else since it was found
        chunks: list[bytes] = []
        got = 0
        while got < limit:
            data = os.read(fd, limit - got)
            if not data:
                break
            chunks.append(data)
            got += len(data)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    if got >= limit:
        text = text.rstrip("\ufffd")  # a cut may fall inside a character
    return text, max(info.st_size, got)
