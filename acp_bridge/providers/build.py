"""From settings to a provider factory, for ``--provider anthropic|openai``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..context.config import ContextConfig, context_config
from .config import ConfigError, ProviderConfig, base_url_problem
from .retry import RetryPolicy
from .vendors import ANTHROPIC, VENDORS

if TYPE_CHECKING:
    from .base import Provider

__all__ = ["http_provider_factory", "provider_config"]


def provider_config(
    settings: dict[str, Any],
    *,
    idle_timeout: float | None,
    context: ContextConfig | None = None,
) -> ProviderConfig:
    """A checked `ProviderConfig` from merged settings (profile keys, flags winning);
    the system prompt file is read into ``context`` (`context_config`) when not given."""
    provider = settings["provider"]
    vendor = VENDORS[provider]
    models = settings.get("model") or [vendor.model]
    if isinstance(models, str):
        models = [models]
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise ConfigError("model must be a name or a list of names")
    models = list(dict.fromkeys(models))  # each once, first is the default
    if context is None:
        context = context_config(settings)
    budget = settings.get("thinking_budget")
    max_tokens = settings.get("max_tokens") or 4096
    for name, value in (("max_tokens", max_tokens), ("thinking_budget", budget)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    if budget is not None and budget < 1024 and vendor is ANTHROPIC:
        raise ConfigError(f"thinking_budget must be at least 1024 tokens, not {budget}")
    base_url = settings.get("base_url") or vendor.base_url
    problem = base_url_problem(base_url) if isinstance(base_url, str) else "expected a string"
    if problem is not None:
        raise ConfigError(f"base_url: {problem}, got {base_url!r}")
    retry = RetryPolicy(
        max_retries=int(settings.get("max_retries", 3)),
        base_delay=float(settings.get("retry_base_delay", 0.5)),
    )
    return ProviderConfig(
        provider=provider,
        models=tuple(models),
        base_url=base_url,
        key_env=settings.get("api_key_env") or vendor.key_env,
        max_tokens=max_tokens,
        thinking_budget=budget,
        reasoning_effort=settings.get("reasoning_effort"),
        images=bool(settings.get("images", True)),
        idle_timeout=idle_timeout,
        retry=retry,
        context=context,
    )


def http_provider_factory(
    config: ProviderConfig, record: str | None, *, key: str | None = None
) -> Callable[[], Provider]:
    """Import the HTTP stack (only now) and return a per-session provider factory
    (``key``: one that `acp-bridge setup` stored; else the one in ``config.key_env``)."""
    from .http import HttpProvider
    from .recording import Recorder
    from .wire import Wire

    wire: Wire
    if config.provider == ANTHROPIC.name:
        from .anthropic import AnthropicWire

        wire = AnthropicWire(config.key_env)
    else:
        from .openai import OpenAIWire

        wire = OpenAIWire(config.key_env)
    if key is None:
        key = os.environ.get(config.key_env) or None
    recorder = Recorder(record, config.provider) if record else None
    return lambda: HttpProvider(wire, config, key, recorder)
