"""Which provider the bare command serves (`acp_bridge.providers.choose`), case by case."""

from __future__ import annotations

from typing import Any

import pytest

from acp_bridge.providers.choose import AuthRequired, Choice, Stored, choose

CONFIG = "/cfg/config.toml"
SETUP = Stored("openai", "http://127.0.0.1:11434/v1", "qwen3:8b", None, "/cfg/setup.json")
KEYED = Stored("anthropic", None, None, "sk-stored", "the system keyring")


def pick(
    *,
    flags: dict[str, Any] | None = None,
    profile: dict[str, Any] | None = None,
    stored: Stored | None = None,
    env: dict[str, str] | None = None,
) -> Choice:
    return choose(
        flags=flags or {},
        profile=profile or {},
        profile_source="the profile 'default' of " + CONFIG,
        stored=lambda: stored,
        env=env or {},
        config_file=CONFIG,
    )


def test_nothing_configured_says_what_to_set() -> None:
    with pytest.raises(AuthRequired) as raised:
        pick()
    text = str(raised.value)
    for needed in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "acp-bridge setup", CONFIG):
        assert needed in text


def test_a_key_in_the_environment_anthropic_first() -> None:
    both = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    assert pick(env=both).provider == "anthropic"
    only_openai = pick(env={"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://h/v1"})
    assert only_openai.provider == "openai"
    assert only_openai.settings["base_url"] == "http://h/v1"
    assert only_openai.source == "OPENAI_API_KEY in the environment"
    assert only_openai.key is None  # read from the variable, as configured


def test_setup_wins_over_the_environment_and_the_profile_over_setup() -> None:
    env = {"ANTHROPIC_API_KEY": "a"}
    from_setup = pick(stored=SETUP, env=env)
    assert from_setup.provider == "openai"
    assert from_setup.settings["base_url"] == SETUP.base_url
    assert from_setup.settings["model"] == "qwen3:8b"
    assert from_setup.key == ""  # no key at all: not the environment's
    profile = {"provider": "anthropic", "model": "claude-x"}
    from_profile = pick(profile=profile, stored=SETUP, env=env)
    assert (from_profile.provider, from_profile.source) == (
        "anthropic",
        f"the profile 'default' of {CONFIG}",
    )


def test_flags_win_over_what_setup_stored() -> None:
    choice = pick(flags={"model": ["other"], "provider": None}, stored=SETUP)
    assert choice.settings["model"] == ["other"]
    assert choice.settings["base_url"] == SETUP.base_url


def test_the_vendor_api_without_a_key_asks_for_one() -> None:
    with pytest.raises(AuthRequired, match="Set ANTHROPIC_API_KEY"):
        pick(flags={"provider": "anthropic"})
    with pytest.raises(AuthRequired, match="Set MY_KEY"):
        pick(profile={"provider": "openai", "api_key_env": "MY_KEY"})
    # A server of your own may need no key.
    assert pick(flags={"provider": "openai", "base_url": "http://127.0.0.1:8080/v1"})


def test_a_chosen_vendor_takes_the_key_setup_stored_for_it() -> None:
    choice = pick(flags={"provider": "anthropic"}, stored=KEYED)
    assert choice.key == "sk-stored"
    assert choice.settings["api_key_env"] == "the system keyring"
    # Not for another vendor, nor another URL, nor when the variable is set.
    with pytest.raises(AuthRequired):
        pick(flags={"provider": "openai"}, stored=KEYED)
    elsewhere = pick(flags={"provider": "anthropic", "base_url": "http://proxy"}, stored=KEYED)
    assert elsewhere.key is None
    own = pick(flags={"provider": "anthropic"}, stored=KEYED, env={"ANTHROPIC_API_KEY": "e"})
    assert own.key is None


def test_fake_is_a_choice_like_any_other() -> None:
    def never() -> Stored | None:
        raise AssertionError("setup is not read when a provider is chosen")

    choice = choose(
        flags={"provider": None},
        profile={"provider": "fake"},
        profile_source="p",
        stored=never,
        env={},
        config_file=CONFIG,
    )
    assert choice.provider == "fake"
