"""Where sessions live.

The state directory is, in order of precedence: ``--state-dir``, the
``ACP_BRIDGE_STATE_DIR`` environment variable, ``$XDG_STATE_HOME/acp-bridge``,
and ``~/.local/state/acp-bridge`` (the XDG default).  Session logs are
``<state-dir>/sessions/<session-id>.jsonl``.

Logs hold prompts and the files embedded in them, so they are private: every
folder the bridge creates is 0700 and every log 0600, whatever the umask.
A folder that already exists is left as it is (never made looser).

The config directory (the config file and what ``acp-bridge setup`` stores)
is ``ACP_BRIDGE_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/acp-bridge``, else
``~/.config/acp-bridge``.
"""

from __future__ import annotations

import os

ENV_STATE_DIR = "ACP_BRIDGE_STATE_DIR"
ENV_CONFIG_DIR = "ACP_BRIDGE_CONFIG_DIR"

# Modes of what the bridge creates (see `make_private_dirs`).
DIR_MODE = 0o700
FILE_MODE = 0o600


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


def config_dir() -> str:
    explicit = os.environ.get(ENV_CONFIG_DIR)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "acp-bridge")


def default_config_file() -> str:
    """The config file read when ``--config`` is not given (if it exists)."""
    return os.path.join(config_dir(), "config.toml")


def resolve_state_dir(option: str | None) -> str:
    if option:
        return os.path.abspath(os.path.expanduser(option))
    return default_state_dir()


def make_private_dirs(path: str) -> None:
    """Create ``path`` and any missing parent, each one 0700 whatever the umask.

    Folders that exist already keep their mode.
    """
    path = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue  # created meanwhile by someone else: not ours to change
        # The umask may have removed bits (never added any): set exactly 0700.
        os.chmod(folder, DIR_MODE)


def create_private_file(path: str) -> None:
    """Create ``path``, 0600 whatever the umask; an existing file is left as it is."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
