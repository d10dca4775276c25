"""Where sessions live.

The state directory is, in order of precedence: ``--state-dir``, the
``ACP_BRIDGE_STATE_DIR`` environment variable, ``$XDG_STATE_HOME/acp-bridge``,
and ``~/.local/state/acp-bridge`` (the XDG default).  Session logs are
``<state-dir>/sessions/<session-id>.jsonl``.
"""

from __future__ import annotations

import os

ENV_STATE_DIR = "ACP_BRIDGE_STATE_DIR"


def default_state_dir() -> str:
    explicit = os.environ.get(ENV_STATE_DIR)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    xdg = os.environ.get("XDG_STATE_HOME")
    base = (
        xdg
        if xdg and os.path.isabs(xdg)
        else os.path.join(os.path.expanduser("~"), ".local", "state")
    )
    return os.path.join(base, "acp-bridge")


def resolve_state_dir(option: str | None) -> str:
    if option:
        return os.path.abspath(os.path.expanduser(option))
    return default_state_dir()
