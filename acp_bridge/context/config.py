"""The context settings: flags over the config file's profile.

Keys of a profile (``[profiles.NAME]``, see `acp_bridge.providers.config`)::

    system = "~/prompts/extra.md"     # as --system FILE
    system_mode = "append"            # or "replace", as --system-mode
    compact_threshold = 0.8           # as --compact-threshold
    [profiles.NAME.context_windows]   # per model, in tokens
    "qwen3:8b" = 8192
    [profiles.NAME.prices]            # per model, per million tokens
    "claude-sonnet-4-5" = { input = 3.0, output = 15.0, currency = "USD" }

``--context-window N`` sets the window of every model and wins over the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..config_error import ConfigError

__all__ = [
    "CONTEXT_FLAG_KEYS",
    "ContextConfig",
    "Price",
    "context_config",
]

SYSTEM_MODES: Final = ("append", "replace")
DEFAULT_THRESHOLD: Final = 0.8
# Keys a flag can also set (the flag wins), and keys only the file sets.
CONTEXT_FLAG_KEYS: Final = ("system", "system_mode", "compact_threshold")


@dataclass(frozen=True, slots=True)
class Price:
    """What a model costs, per million tokens."""

    input: float
    output: float
    currency: str = "USD"

    def of(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1_000_000


@dataclass(frozen=True, slots=True)
class ContextConfig:
    # The text of --system FILE, and whether it replaces or extends the default prompt.
    system: str | None = None
    system_mode: str = "append"
    # --context-window: the window of every model (tokens).
    context_window: int | None = None
    # The config file's windows, per model name.
    context_windows: Mapping[str, int] = field(default_factory=dict)
    # Compact when the next request would pass this fraction of the window.
    compact_threshold: float = DEFAULT_THRESHOLD
    prices: Mapping[str, Price] = field(default_factory=dict)
    # Where the user's own AGENTS.md is (None: the default config directory).
    config_dir: str | None = None


def context_config(
    settings: Mapping[str, Any], *, context_window: int | None = None
) -> ContextConfig:
    """A checked `ContextConfig` from merged settings (profile keys, flags winning).

    Reads the ``system`` file; raises `ConfigError` saying what to fix.
    """
    system = None
    system_file = settings.get("system")
    if system_file:
        try:
            with open(os.path.expanduser(str(system_file)), encoding="utf-8") as f:
                system = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise ConfigError(
                f"cannot read the system prompt file {system_file}: {reason}"
            ) from None
    mode = settings.get("system_mode") or "append"
    if mode not in SYSTEM_MODES:
        raise ConfigError(f"system_mode must be 'append' or 'replace', not {mode!r}")
    threshold = settings.get("compact_threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"compact_threshold must be a number, not {threshold!r}")
    if not 0.1 <= threshold <= 1.0:
        raise ConfigError(f"compact_threshold must be from 0.1 to 1.0, not {threshold!r}")
    if context_window is not None and context_window < 1:
        raise ConfigError(f"context_window must be a positive integer, not {context_window!r}")
    return ContextConfig(
        system=system,
        system_mode=mode,
        context_window=context_window,
        context_windows=_windows(settings.get("context_windows", {})),
        compact_threshold=float(threshold),
        prices=_prices(settings.get("prices", {})),
    )


def _windows(table: object) -> dict[str, int]:
    if not isinstance(table, Mapping):
        raise ConfigError("context_windows must be a table of model = tokens")
    out: dict[str, int] = {}
    for model, size in table.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"context_windows.{model} must be a positive number of tokens, not {size!r}"
            )
        out[str(model)] = size
    return out


def _prices(table: object) -> dict[str, Price]:
    if not isinstance(table, Mapping):
        raise ConfigError("prices must be a table of model = {input, output, currency}")
    out: dict[str, Price] = {}
    for model, entry in table.items():
        where = f"prices.{model}"
        if not isinstance(entry, Mapping) or set(entry) - {"input", "output", "currency"}:
            raise ConfigError(f'{where} must be {{input = N, output = N, currency = "USD"}}')
        values = []
        for key in ("input", "output"):
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(
                    f"{where}.{key} must be a price per million tokens, not {value!r}"
                )
            values.append(float(value))
        currency = entry.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            raise ConfigError(f"{where}.currency must be a currency code, not {currency!r}")
        out[str(model)] = Price(values[0], values[1], currency)
    return out
