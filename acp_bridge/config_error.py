"""The one error of configuration loading, shared by the provider and context settings.

Its own module so that `acp_bridge.providers.config` and
`acp_bridge.context.config` can both raise it without importing each other.
"""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(Exception):
    """A configuration that cannot work; the message says what to fix."""
