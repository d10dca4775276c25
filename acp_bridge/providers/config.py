"""Configuration of the real providers: command-line flags over an optional TOML profile.

A config file holds named profiles; ``--profile NAME`` picks one (default: the
profile named ``default``, if the file has one).  Every key is optional and
has the name of its flag, with ``_`` for ``-``::

    [profiles.claude]
    provider = "anthropic"
    model = ["claude-sonnet-4-5", "claude-opus-4-1"]   # or one string
    max_tokens = 8192
    thinking_budget = 4000
    system = "~/prompts/coding.md"                      # a file, as --system
    system_mode = "append"                              # or "replace"
    compact_threshold = 0.8
    context_windows = { "claude-opus-4-1" = 200000 }    # tokens, per model
    prices = { "claude-opus-4-1" = { input = 15.0, output = 75.0 } }  # per million tokens

    [profiles.local]
    provider = "openai"
    base_url = "http://127.0.0.1:11434/v1"
    model = "qwen3:8b"
    api_key_env = "OLLAMA_API_KEY"
    images = false

Flags given on the command line win over the profile.  Keys that only the
file sets: ``retry_base_delay`` (seconds), ``images``, ``context_windows``,
``prices`` (see `acp_bridge.context.config` for the context keys).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..config_error import ConfigError
from ..paths import read_small_file
from .retry import RetryPolicy

if TYPE_CHECKING:
    from ..context.config import ContextConfig

__all__ = [
    "FLAG_KEYS",
    "ConfigError",
    "ProviderConfig",
    "base_url_problem",
    "load_profile",
]

# The keys a command-line flag can also set (the flag wins over the profile).
FLAG_KEYS: Final = (
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "max_tokens",
    "system",
    "thinking_budget",
    "reasoning_effort",
    "max_retries",
    "system_mode",
    "compact_threshold",
)
PROFILE_KEYS: Final = frozenset(
    {*FLAG_KEYS, "retry_base_delay", "images", "context_windows", "prices"}
)


def base_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an API base URL (an ``http``/``https`` URL with a
    host), or None when it can.  Checked at start, so a typo fails there and
    not at the first prompt, after its retries."""
    from urllib.parse import urlsplit

    expected = "expected an http:// or https:// URL with a host (like https://api.openai.com/v1)"
    if not url or any(c.isspace() for c in url):
        return expected
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number
    except ValueError:
        return expected
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return expected
    return None


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    provider: str
    models: tuple[str, ...]
    base_url: str
    key_env: str
    max_tokens: int = 4096
    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    images: bool = True
    idle_timeout: float | None = 300.0
    connect_timeout: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # The system prompt's settings, windows and prices (None: the defaults).
    context: ContextConfig | None = None


def load_profile(path: str, name: str | None) -> dict[str, Any]:
    """The chosen profile of a TOML config file, checked."""
    import tomllib

    try:
        data = tomllib.loads(read_small_file(os.path.expanduser(path)).decode())
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the config file {path} is not valid TOML: {exc}") from None
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"{path}: 'profiles' must be a table of [profiles.NAME] tables")
    if name is None:
        name = "default"
        if name not in profiles:
            return {}
    profile = profiles.get(name)
    if not isinstance(profile, dict):
        known = ", ".join(sorted(profiles)) or "none"
        raise ConfigError(f"{path}: no profile {name!r} (profiles: {known})")
    unknown = sorted(set(profile) - PROFILE_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: profile {name!r}: unknown key(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(PROFILE_KEYS))})"
        )
    return profile
