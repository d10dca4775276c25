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

The small files the bridge reads at start-up and per session (the config
file, ``setup.json``, ``permissions.json``) are read by `read_small_file`: a
FIFO or a device in their place (or a link to one) must neither freeze nor
balloon the bridge.
"""

from __future__ import annotations

import errno
import os
import stat

ENV_STATE_DIR = "ACP_BRIDGE_STATE_DIR"
ENV_CONFIG_DIR = "ACP_BRIDGE_CONFIG_DIR"

# The largest config, setup or permissions file read (bytes).
SMALL_FILE_LIMIT = 4 * 1024 * 1024

# Modes of what the bridge creates (see `make_private_dirs`).
DIR_MODE = 0o700
FILE_MODE = 0o600


def _home(env: str, xdg: str, *fallback: str) -> str:
    """``$env`` if set, else ``$xdg/acp-bridge`` (an absolute one), else
    ``~/<fallback>/acp-bridge``: the state and the config directory alike."""
    explicit = os.environ.get(env)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get(xdg)
    if not (base and os.path.isabs(base)):
        base = os.path.join(os.path.expanduser("~"), *fallback)
    return os.path.join(base, "acp-bridge")


def default_state_dir() -> str:
    return _home(ENV_STATE_DIR, "XDG_STATE_HOME", ".local", "state")


def config_dir() -> str:
    return _home(ENV_CONFIG_DIR, "XDG_CONFIG_HOME", ".config")


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


def read_small_file(path: str, limit: int = SMALL_FILE_LIMIT) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed, as
    for a config file kept with the user's dotfiles).

    Opened without blocking (a FIFO's open would wait for a writer), then
    checked: anything but a regular file (a FIFO, ``/dev/zero``, a directory)
    is refused, and so is a file over ``limit`` bytes.  Raises
    FileNotFoundError when there is none, else OSError whose ``strerror`` says
    why, for the caller's message."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, a device or a socket"
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", path)
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(1024 * 1024, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                mib, rest = divmod(limit, 1024 * 1024)
                most = f"{mib} MiB" if mib and not rest else f"{limit} bytes"
                raise OSError(errno.EFBIG, f"it is larger than {most}", path)
        return b"".join(chunks)
    finally:
        os.close(fd)
