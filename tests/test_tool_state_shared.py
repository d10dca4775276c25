"""What every session has in common is one object, by value: an idle session keeps a
reference to it, not a copy, and sessions whose values differ never share one."""

from __future__ import annotations

import dataclasses

from acp_bridge.acp import tool_setup
from acp_bridge.acp.tool_setup import _shared
from acp_bridge.tools.base import ClientCapabilities
from acp_bridge.tools.secret_env import env_policy


def _policy_key(env: object) -> object:
    return (env.hidden, env.values)  # type: ignore[attr-defined]


def test_equal_capabilities_are_one_object_and_different_ones_are_not() -> None:
    caps = {"fs": {"readTextFile": True}, "terminal": True}
    first = _shared(ClientCapabilities.from_initialize(caps), dataclasses.astuple)
    again = _shared(ClientCapabilities.from_initialize(dict(caps)), dataclasses.astuple)
    other = _shared(ClientCapabilities.from_initialize({"terminal": True}), dataclasses.astuple)
    assert again is first
    assert other is not first
    assert (other.read_text_file, first.read_text_file) == (False, True)


def test_an_environment_policy_is_shared_only_with_the_same_secrets() -> None:
    env = {"PATH": "/usr/bin", "MY_API_KEY": "sk-0123456789abcdef0123"}
    first = _shared(env_policy(env), _policy_key)
    again = _shared(env_policy(dict(env)), _policy_key)
    other = _shared(env_policy({**env, "MY_API_KEY": "sk-another-secret-value-0"}), _policy_key)
    assert again is first
    assert other is not first
    assert "sk-another-secret-value-0" in other.values
    assert "sk-another-secret-value-0" not in first.values


def test_the_table_stays_bounded() -> None:
    for n in range(tool_setup._SHARED_MAX * 3):
        _shared(env_policy({"TOKEN": f"secret-value-number-{n:08d}"}), _policy_key)
    assert len(tool_setup._SHARED) <= tool_setup._SHARED_MAX
