"""How large a model's context window is, and what else the loop needs to know of the model.

The window of the session's model, in order of precedence:

1. ``--context-window N`` (every model);
2. the config file's ``context_windows`` entry for the model;
3. what an OpenAI-compatible server says of it (a ``/models`` entry with a
   context length; asked once per server and model, see
   `acp_bridge.providers.models`), and, for the scripted provider, a
   ``context_window`` its script reports in a ``usage`` event;
4. `KNOWN_WINDOWS`, the models this project's documentation names (and every
   ``claude-`` model);
5. `DEFAULT_WINDOW`, a conservative 32,768 tokens.

Each provider answers for its model with ``Provider.model_info``
(`acp_bridge.providers.base`): a `ModelInfo` from `resolve_window`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .config import ContextConfig, Price

__all__ = [
    "DEFAULT_WINDOW",
    "ModelInfo",
    "resolve_window",
]

DEFAULT_WINDOW: Final = 32_768
KNOWN_WINDOWS: Final[Mapping[str, int]] = {
    "claude-sonnet-4-5": 200_000,
    "claude-opus-4-1": 200_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "qwen3:8b": 40_960,
}
# Every Claude model has at least this window.
_PREFIXES: Final = (("claude-", 200_000),)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the agent loop knows of the session's current model."""

    context_window: int
    # Where the window came from: flag, config, server, script, known or default.
    window_source: str
    # Tokens the model may write per request: the room kept free in the window.
    max_output_tokens: int = 0
    price: Price | None = None
    # Send an estimated usage_update after a response that reported no usage
    # (a real model; the scripted one reports what its script says, or nothing).
    estimate_usage: bool = True


def known_window(model: str | None) -> int | None:
    if not model:
        return None
    if model in KNOWN_WINDOWS:
        return KNOWN_WINDOWS[model]
    for prefix, size in _PREFIXES:
        if model.startswith(prefix):
            return size
    return None


def resolve_window(
    model: str | None, config: ContextConfig, *, reported: int | None = None
) -> tuple[int, str]:
    """The window of ``model`` and its source (``reported``: what the server or script said)."""
    if config.context_window:
        return config.context_window, "flag"
    if model is not None and model in config.context_windows:
        return config.context_windows[model], "config"
    if reported:
        return reported, "server"
    known = known_window(model)
    if known is not None:
        return known, "known"
    return DEFAULT_WINDOW, "default"
