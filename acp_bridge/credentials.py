"""What ``acp-bridge setup`` stores and ``logout`` forgets.

``setup.json`` in the config directory (0600, in a 0700 folder) names the
provider, its base URL and model, and where the key is: in the system
keyring (through the optional ``keyring`` package, when it has a real
backend) or in the file itself.  Nothing here logs a key or puts one in an
exception's message.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any, Final, Literal

from .paths import FILE_MODE, config_dir, make_private_dirs, read_small_file
from .providers.choose import Stored
from .providers.config import ConfigError
from .providers.vendors import VENDORS

__all__ = [
    "KEYRING_SERVICE",
    "Keyring",
    "Saved",
    "find_keyring",
    "forget",
    "load_stored",
    "save",
    "setup_file",
]

KEYRING_SERVICE: Final = "acp-bridge-agent"
KEYRING_USER: Final = "api-key"
FORMAT_VERSION: Final = 1
KEYRING_LABEL: Final = "the system keyring"

Store = Literal["auto", "keyring", "file"]


def setup_file() -> str:
    return os.path.join(config_dir(), "setup.json")


@dataclass(frozen=True, slots=True)
class Keyring:
    """A usable keyring backend (not keyring's fail or null backend)."""

    backend: Any
    name: str

    def get(self) -> str | None:
        value = self.backend.get_password(KEYRING_SERVICE, KEYRING_USER)
        return value if isinstance(value, str) else None

    def set(self, key: str) -> None:
        self.backend.set_password(KEYRING_SERVICE, KEYRING_USER, key)

    def delete(self) -> bool:
        try:
            self.backend.delete_password(KEYRING_SERVICE, KEYRING_USER)
        except Exception:  # keyring.errors.PasswordDeleteError: nothing was there
            return False
        return True


def find_keyring() -> Keyring | None:
    """The system keyring, if the ``keyring`` package is installed and has a real backend."""
    try:
        import keyring
        import keyring.backends.fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    if isinstance(backend, keyring.backends.fail.Keyring):
        return None
    module = type(backend).__module__
    if module.endswith(".null"):
        return None
    if module.endswith(".chainer") and not getattr(backend, "backends", None):
        return None
    return Keyring(backend, type(backend).__name__)


@dataclass(frozen=True, slots=True)
class Saved:
    path: str
    # "the system keyring (SecretService)", the file's path, or None: no key.
    key_where: str | None


def save(
    provider: str,
    base_url: str | None,
    model: str | None,
    key: str | None,
    *,
    store: Store = "auto",
) -> Saved:
    """Store a setup, replacing any earlier one (and its key in the keyring)."""
    path = setup_file()
    data: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "provider": provider,
        "base_url": base_url,
        "model": model,
        "key": "none",
    }
    ring = find_keyring() if store != "file" else None
    if store == "keyring" and ring is None:
        raise ConfigError(
            "no system keyring is available (install the 'keyring' package, with a "
            "backend such as the Secret Service); store the key in a file with --store file"
        )
    key_where: str | None = None
    if key is not None and ring is not None:
        try:
            ring.set(key)
        except Exception as exc:
            if store == "keyring":
                reason = type(exc).__name__
                raise ConfigError(f"the system keyring refused the key: {reason}") from None
            ring = None
        else:
            data["key"] = "keyring"
            key_where = f"{KEYRING_LABEL} ({ring.name})"
    if key is not None and data["key"] == "none":
        data["key"] = "file"
        data["api_key"] = key
        key_where = path
    if data["key"] != "keyring" and _key_in_keyring(path):
        # A key kept in the keyring by an earlier setup is not left behind.
        old = find_keyring()
        if old is not None:
            old.delete()
    make_private_dirs(os.path.dirname(path))
    _write_private(path, json.dumps(data, indent=2) + "\n")
    return Saved(path, key_where)


def _write_private(path: str, text: str) -> None:
    """Write ``path`` atomically, 0600 from its creation on."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if fd != -1:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load_stored() -> Stored | None:
    """The stored setup, or None if there is none; `ConfigError` if it is unusable."""
    path = setup_file()
    try:
        data = json.loads(read_small_file(path))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        raise ConfigError(f"cannot read {path} ({reason}): run `acp-bridge setup` again") from None
    if not isinstance(data, dict) or data.get("provider") not in VENDORS:
        raise ConfigError(f"{path} is not a setup this version knows: run `acp-bridge setup` again")
    where = data.get("key")
    key: str | None = None
    label = path
    if where == "file":
        key = data.get("api_key") if isinstance(data.get("api_key"), str) else None
    elif where == "keyring":
        label = KEYRING_LABEL
        ring = find_keyring()
        try:
            key = ring.get() if ring is not None else None
        except Exception:
            key = None
        if key is None:
            raise ConfigError(
                f"{path} says the API key is in {KEYRING_LABEL}, which cannot give it now "
                "(is the keyring unlocked?): run `acp-bridge setup` again"
            )
    return Stored(
        provider=data["provider"],
        base_url=_text(data.get("base_url")),
        model=_text(data.get("model")),
        key=key or None,
        key_label=label,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _key_in_keyring(path: str) -> bool:
    """Whether the setup stored at ``path`` keeps its key in the keyring."""
    try:
        data = json.loads(read_small_file(path))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("key") == "keyring"


def forget() -> list[str]:
    """Remove the stored setup and its key; returns what was removed."""
    removed: list[str] = []
    path = setup_file()
    if _key_in_keyring(path):
        ring = find_keyring()
        if ring is not None and ring.delete():
            removed.append(f"the API key in {KEYRING_LABEL} ({ring.name})")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
        removed.append(path)
    return removed
