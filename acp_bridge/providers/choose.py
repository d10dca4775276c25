"""Which provider the bridge serves when it is started.

In order, the first that names a provider wins:

1. ``--provider`` (``fake`` is the keyless scripted provider; ``--script``
   alone also means ``fake``);
2. the config file's profile (``--config`` or the default config file, the
   profile named by ``--profile`` or ``default``), if it sets ``provider``;
3. what ``acp-bridge setup`` stored (`acp_bridge.credentials`);
4. a key in the environment: ``ANTHROPIC_API_KEY``, then ``OPENAI_API_KEY``
   (`acp_bridge.providers.vendors`).

When nothing does, or the chosen vendor's own API is chosen without a key,
`AuthRequired` says what to set: the server then answers ``session/new``
with ``-32000`` (authentication required) and that message.

Flags win over the profile and over what was stored.  A vendor's default
base URL can be moved with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``, as
the vendors' own SDKs allow.  This module reads nothing itself: the caller
passes the profile, the stored setup and the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .vendors import LOCAL_SERVERS, VENDORS

__all__ = ["AuthRequired", "Choice", "Stored", "choose"]


class AuthRequired(Exception):
    """No model provider can start without something the user must set; the
    message says what (an API key, ``acp-bridge setup``)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """What ``acp-bridge setup`` stored: a provider, where it is, and its key."""

    provider: str
    base_url: str | None
    model: str | None
    key: str | None
    # Where the key is kept, for messages: "the system keyring", a file path.
    key_label: str


@dataclass(frozen=True, slots=True)
class Choice:
    """The settings of the provider to serve (profile keys, flags winning)."""

    settings: dict[str, Any]
    # The key when it does not come from the environment (stored by setup;
    # "" for none at all); None: the variable the settings name.
    key: str | None
    # Where the choice came from, for the info line on stderr.
    source: str

    @property
    def provider(self) -> str:
        return str(self.settings["provider"])


def setup_hint(config_file: str) -> str:
    return (
        f"Set {' or '.join(v.key_env for v in VENDORS.values())} in the environment the editor "
        "starts acp-bridge with, or run `acp-bridge setup` in a terminal (an API key, or the URL "
        f"of a local server such as {LOCAL_SERVERS[0][0]}), or add a [profiles.default] to "
        f"{config_file}. "
        "For the keyless demo, start it with --provider fake."
    )


def choose(
    *,
    flags: Mapping[str, Any],
    profile: Mapping[str, Any],
    profile_source: str | None,
    stored: Callable[[], Stored | None],
    env: Mapping[str, str],
    config_file: str,
) -> Choice:
    """The provider to serve; raises `AuthRequired` when none can start.

    ``stored`` reads what setup stored (called only when it is needed).
    """
    given = {k: v for k, v in flags.items() if v is not None}
    if given.get("provider") or profile.get("provider"):
        settings = _with_base_url({**profile, **given}, env)
        source = "--provider" if given.get("provider") else str(profile_source)
        return _checked(_with_stored_key(Choice(settings, None, source), stored, env), env)
    return _unchosen(given, profile, stored(), env, config_file)


def _unchosen(
    given: dict[str, Any],
    profile: Mapping[str, Any],
    stored: Stored | None,
    env: Mapping[str, str],
    config_file: str,
) -> Choice:
    """No flag or profile names a provider: what setup stored, else a key in the environment."""
    if stored is not None:
        settings = {"provider": stored.provider, **profile, **given}
        if stored.base_url and "base_url" not in given:
            settings["base_url"] = stored.base_url
        if stored.model and "model" not in given:
            settings["model"] = stored.model
        if stored.key is not None:
            settings["api_key_env"] = stored.key_label
        # No stored key means none: the environment's is not sent to a local server.
        choice = Choice(_with_base_url(settings, env), stored.key or "", "acp-bridge setup")
        return _checked(choice, env)
    for vendor in VENDORS.values():
        if env.get(vendor.key_env):
            settings = {"provider": vendor.name, **profile, **given}
            settings.pop("api_key_env", None)  # the variable that was found
            source = f"{vendor.key_env} in the environment"
            return Choice(_with_base_url(settings, env), None, source)
    raise AuthRequired(f"acp-bridge has no model provider configured. {setup_hint(config_file)}")


def _with_stored_key(
    choice: Choice, stored: Callable[[], Stored | None], env: Mapping[str, str]
) -> Choice:
    """A provider chosen by a flag or a profile, whose key variable is unset, takes
    the key that setup stored for the same provider at the same URL."""
    provider = choice.provider
    vendor = VENDORS.get(provider)
    if vendor is None:
        return choice
    variable = str(choice.settings.get("api_key_env") or vendor.key_env)
    if env.get(variable):
        return choice
    setup = stored()
    if setup is None or setup.provider != provider:
        return choice
    here = str(choice.settings.get("base_url") or vendor.base_url).rstrip("/")
    there = (setup.base_url or vendor.base_url).rstrip("/")
    if here != there:
        return choice
    settings = {**choice.settings, "api_key_env": setup.key_label}
    return Choice(settings, setup.key or "", f"{choice.source}, with the key of acp-bridge setup")


def _with_base_url(settings: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    vendor = VENDORS.get(settings["provider"])
    if not settings.get("base_url") and vendor and env.get(vendor.base_url_env):
        settings = {**settings, "base_url": env[vendor.base_url_env]}
    return settings


def _checked(choice: Choice, env: Mapping[str, str]) -> Choice:
    """Refuse a vendor's own API without a key (a local server may need none)."""
    provider = choice.provider
    vendor = VENDORS.get(provider)
    if vendor is None:
        return choice
    base_url = str(choice.settings.get("base_url") or vendor.base_url)
    if base_url.rstrip("/") != vendor.base_url.rstrip("/"):
        return choice
    if choice.key:
        return choice
    variable = str(choice.settings.get("api_key_env") or vendor.key_env)
    if env.get(variable):
        return choice
    raise AuthRequired(
        f"{provider} (chosen by {choice.source}) needs an API key. Set {variable} in the "
        "environment the editor starts acp-bridge with, or run `acp-bridge setup` in a terminal."
    )
