"""Paths a tool touches: made absolute and checked against the session's directories.

They only look at the text of a path; `acp_bridge.tools.localfs` resolves
paths (symlinks included) and opens them at the moment of use.
"""

from __future__ import annotations

import os
from typing import Final

from ..redact import SECRETS

# Never read or written by a tool, even when the user allows it.
SYSTEM_DIRS: Final = ("/proc", "/sys", "/dev")


def resolve(path: str, cwd: str) -> str:
    """``path`` as an absolute, normalized path (a relative one is taken from ``cwd``)."""
    expanded = os.path.expanduser(path)
    if not os.path.isabs(expanded):
        expanded = os.path.join(cwd, expanded)
    return os.path.normpath(expanded)


def in_system_dir(path: str) -> bool:
    """Whether the absolute ``path`` is in /proc, /sys or /dev (or is one of them)."""
    return any(within(os.path.normpath(path), base) for base in SYSTEM_DIRS)


def within(path: str, root: str) -> bool:
    """Whether the absolute, normalized ``path`` is ``root`` or lies under it."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def truncate(text: str, limit: int) -> str:
    """``text`` without the process's secrets, cut to ``limit`` characters,
    saying so when it was cut.  Redacted before the cut, and a secret's start
    at the cut is redacted too (`acp_bridge.redact.Redactor.cut`)."""
    text = SECRETS.text(text)
    if len(text) <= limit:
        return text
    return (
        SECRETS.cut(text, limit)
        + f"\n[output truncated: showing the first {limit} of {len(text)} characters]"
    )
