"""Unit tests of the tool layer's pure parts: paths, permission decisions,
the registry's schemas, and the state a log rebuilds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from acp_bridge.redact import Redactor
from acp_bridge.tools import TOOLS, Tool, ToolContext, ToolOutput, ToolRegistry
from acp_bridge.tools import permissions as perm
from acp_bridge.tools.base import ClientCapabilities
from acp_bridge.tools.localfs import check_paths
from acp_bridge.tools.paths import in_system_dir, resolve, truncate
from acp_bridge.tools.secret_env import env_policy, is_secret, parse_pass_env
from acp_bridge.tools.state import from_records


def test_resolve_makes_paths_absolute_from_the_cwd() -> None:
    assert resolve("a/../b.txt", "/w") == "/w/b.txt"
    assert resolve("/etc/passwd", "/w") == "/etc/passwd"


def test_check_paths_confines_to_the_roots_and_follows_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    other = tmp_path / "other"
    root.mkdir()
    other.mkdir()

    def inside(path: str, roots: list[str]) -> bool:
        outside, system = check_paths([path], roots)
        return not outside and not system

    assert inside(str(root / "a.txt"), [str(root)])
    assert inside(str(other / "b"), [str(root), str(other)])
    assert not inside(str(tmp_path / "rootless.txt"), [str(root)])
    assert not inside(os.path.normpath(str(root / ".." / "x")), [str(root)])
    (root / "link").symlink_to(other)
    assert not inside(str(root / "link" / "secret"), [str(root)])
    (other / "back").symlink_to(root / "a.txt")
    # Named outside, even if it leads inside: asked for.
    assert not inside(str(other / "back"), [str(root)])
    assert in_system_dir("/proc")
    assert in_system_dir("/dev/null")
    assert not in_system_dir("/procfs/x")


def test_truncate_states_the_cut() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcdef", 3) == "abc\n[output truncated: showing the first 3 of 6 characters]"


@pytest.mark.parametrize(
    ("mode", "kind", "read_only", "outside", "remembered", "expected"),
    [
        ("ask", "read", True, False, None, perm.RUN),
        ("ask", "edit", False, False, None, perm.ASK),
        ("ask", "execute", False, False, None, perm.ASK),
        ("accept_edits", "edit", False, False, None, perm.RUN),
        ("accept_edits", "execute", False, False, None, perm.ASK),
        ("read_only", "edit", False, False, None, perm.REFUSE_MODE),
        ("read_only", "execute", False, False, perm.ALLOW_ALWAYS, perm.REFUSE_MODE),
        ("read_only", "read", True, False, None, perm.RUN),
        ("ask", "read", True, True, None, perm.ASK),
        ("ask", "edit", False, True, perm.ALLOW_ALWAYS, perm.ASK),
        ("ask", "edit", False, False, perm.ALLOW_ALWAYS, perm.RUN),
        ("accept_edits", "edit", False, False, perm.REJECT_ALWAYS, perm.REFUSE_REMEMBERED),
    ],
)
def test_permission_decisions(
    mode: str, kind: str, read_only: bool, outside: bool, remembered: str | None, expected: str
) -> None:
    assert (
        perm.decide(
            mode=mode, kind=kind, read_only=read_only, outside=outside, remembered=remembered
        )
        == expected
    )


def test_chosen_reads_only_offered_selected_options() -> None:
    def selected(option: object) -> dict[str, object]:
        return {"outcome": {"outcome": "selected", "optionId": option}}

    offered = perm.OPTIONS
    assert perm.chosen(selected("allow_always"), offered) == ("allow_always", None)
    assert perm.chosen({"outcome": {"outcome": "cancelled"}}, offered) == (None, None)
    # Not offered: a dismissal, never an allow, and the problem is named.
    option, problem = perm.chosen(selected("allow_always"), perm.OUTSIDE_OPTIONS)
    assert option is None
    assert problem == "option 'allow_always' was not offered (offered: allow_once, reject_once)"
    assert perm.chosen(selected("yes!"), offered)[0] is None
    malformed = {
        "null": (None, "the result is null, not an object"),
        "no outcome": ({}, "the result has no 'outcome'"),
        "outcome a string": ({"outcome": "selected"}, "'outcome' is a string, not an object"),
        "unknown kind": (
            {"outcome": {"outcome": "chosen"}},
            "'outcome.outcome' is 'chosen', not 'selected' or 'cancelled'",
        ),
        "no optionId": (
            {"outcome": {"outcome": "selected"}},
            "'outcome.optionId' is null, not a string",
        ),
        "numeric optionId": (selected(1), "'outcome.optionId' is a number, not a string"),
        "list optionId": (selected(["allow_once"]), "'outcome.optionId' is an array, not a string"),
    }
    for name, (answer, why) in malformed.items():
        assert perm.chosen(answer, offered) == (None, why), name


def test_builtin_tools_have_exactly_the_specified_arguments() -> None:
    specs = {spec.name: spec for spec in TOOLS.specs()}
    assert set(specs) >= {"read_file", "write_file", "edit_file", "run_command"}
    expected = {
        "read_file": ({"path", "line", "limit"}, ["path"]),
        "write_file": ({"path", "content"}, ["path", "content"]),
        "edit_file": ({"path", "old_text", "new_text"}, ["path", "old_text", "new_text"]),
        "run_command": ({"command", "cwd", "timeout_s"}, ["command"]),
    }
    for name, (properties, required) in expected.items():
        schema = specs[name].input_schema
        assert set(schema["properties"]) == properties, name
        assert schema["required"] == required, name


class _EchoArgs(BaseModel):
    text: str


class _Echo(Tool[_EchoArgs]):
    name = "echo"
    description = "Echo."
    kind = "other"
    args_model = _EchoArgs

    async def run(self, args: _EchoArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(args.text)


def test_a_registered_tool_is_offered_with_its_schema() -> None:
    registry = ToolRegistry()
    registry.register(_Echo())
    (spec,) = registry.specs()
    assert spec.name == "echo"
    assert spec.input_schema["properties"]["text"]["type"] == "string"


def test_state_from_the_log() -> None:
    records = [
        {"type": "session/start"},
        {"type": "session/mode", "mode": "read_only"},
        {"type": "permission/rule", "tool": "write_file", "decision": "allow_always", "cwd": "/a"},
        {"type": "permission/rule", "tool": "run_command", "decision": "allow_always", "cwd": "/b"},
        {"type": "permission/rule", "tool": "search", "decision": "allow_always"},
        {"type": "session/mode", "mode": "accept_edits"},
    ]
    # A rule counts only in the cwd it was given in; one without a cwd not at all.
    assert from_records(records, "/a") == ("accept_edits", {"write_file": "allow_always"})
    assert from_records(records, "/b") == ("accept_edits", {"run_command": "allow_always"})


def test_env_policy_hides_secret_variables_and_lets_named_ones_through() -> None:
    environ = {
        "DEEPSEEK_API_KEY": "x",
        "MY_KEY_VAR": "not-a-secret-name",
        "PATH": "/usr/bin",
        "GITHUB_TOKEN": "ghp_0123456789abcdef",
    }
    policy = env_policy(environ, key_env="MY_KEY_VAR", passed=["GITHUB_TOKEN"])
    assert set(policy.hidden) == {
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "MY_KEY_VAR",
    }
    # The provider's key is redacted; a value let through and a short one are not.
    assert policy.values == ("not-a-secret-name",)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AWS_SECRET_ACCESS_KEY", "v"),
        ("AWS_ACCESS_KEY_ID", "v"),
        ("STRIPE_SECRET_KEY", "v"),
        ("openai_api_key", "v"),
        ("ApiKey", "v"),
        ("SSH_PRIVATE_KEY", "v"),
        ("GITHUB_TOKEN", "v"),
        ("tokenfile", "v"),
        ("SECRET", "v"),
        ("DB_PASSWORD", "v"),
        ("MYSQL_PASSWD", "v"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "v"),
        ("NPM_AUTH", "v"),
        ("SMTP_PASS", "v"),
        ("MYSQL_PWD", "v"),
        ("DATABASE_URL", "postgres://app:hunter2hunter2@db:5432/app"),
        ("REPO", "https://ghp_0123456789@github.com/o/r.git"),
    ],
)
def test_secret_variables(name: str, value: str) -> None:
    assert is_secret(name, value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PATH", "/usr/bin"),
        ("PWD", "/home/u"),
        ("OLDPWD", "/home/u"),
        ("KEYBOARD_LAYOUT", "us"),
        ("AUTHOR", "me"),
        ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock"),
        ("DATABASE_URL", "postgres://db:5432/app"),
        ("HOME_PAGE", "mailto:me@example.com"),
    ],
)
def test_not_secret_variables(name: str, value: str) -> None:
    assert not is_secret(name, value)


def test_a_url_with_userinfo_redacts_the_whole_value_and_its_password() -> None:
    url = "postgres://app:hunter2hunter2@db:5432/app"
    policy = env_policy({"DATABASE_URL": url})
    redact = Redactor(policy.values).text
    assert "DATABASE_URL" in policy.hidden
    assert redact(f"url={url}") == "url=[redacted]"
    assert redact("pw: hunter2hunter2") == "pw: [redacted]"
    assert redact("user app") == "user app"


def test_redactor_replaces_values_everywhere_in_json() -> None:
    r = Redactor(["s3cr3t-value", "s3cr3t"])
    value = {"a": ["x s3cr3t-value y", {"s3cr3t-value": 1}], "n": 2, "t": ("s3cr3t",)}
    assert r.json(value) == {
        "a": ["x [redacted] y", {"[redacted]": 1}],
        "n": 2,
        "t": ["[redacted]"],
    }
    assert Redactor().text("anything") == "anything"


def test_parse_pass_env() -> None:
    assert parse_pass_env(["A_TOKEN, B", "C  A_TOKEN", ""]) == ("A_TOKEN", "B", "C")
    with pytest.raises(ValueError, match="'1X' is not an environment variable name"):
        parse_pass_env(["1X"])


def test_capabilities_from_initialize() -> None:
    caps = ClientCapabilities.from_initialize(
        {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": True}
    )
    assert (caps.read_text_file, caps.write_text_file, caps.terminal) == (True, False, True)
    assert ClientCapabilities.from_initialize(None) == ClientCapabilities()


def test_a_loaded_session_gets_its_mode_and_remembered_choices_back() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from acp_bridge.acp.tool_setup import tool_state
    from acp_bridge.loop.turn import TurnConfig
    from acp_bridge.protocol.v1 import V1
    from acp_bridge.providers.script_format import parse_script
    from acp_bridge.providers.scripted import ScriptedProvider

    agent = SimpleNamespace(
        dialect=V1,
        client_capabilities={"terminal": True},
        conn=SimpleNamespace(request=None),
        config=TurnConfig(),
    )
    session = SimpleNamespace(
        provider=ScriptedProvider(parse_script({"responses": [{"events": []}]})),
        id="s",
        cwd="/w",
        log=None,
        outbox=SimpleNamespace(send=None),
        frames=None,
        send_update=None,
    )
    records = [
        {"type": "session/mode", "mode": "read_only"},
        {
            "type": "permission/rule",
            "tool": "run_command",
            "decision": "reject_always",
            "cwd": "/w",
        },
        {"type": "permission/rule", "tool": "write_file", "decision": "allow_always", "cwd": "/v"},
    ]
    state = tool_state(cast(Any, agent), cast(Any, session), ["/x"], records)
    assert (state.mode, state.rules, state.roots) == (
        "read_only",
        {"run_command": "reject_always"},
        ["/w", "/x"],
    )
    assert state.capabilities.terminal
