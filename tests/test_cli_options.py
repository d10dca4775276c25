"""Option errors speak in the user's terms, and every number has a finite bound.

Through the real command line: a bad value exits 2 with one line that names
the option, says what was expected and repeats what was given.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_bridge", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--idle-timeout", "abc"],
            "acp-bridge: --idle-timeout: expected a number of seconds from 0 to 86400, got 'abc'",
        ),
        (
            ["--cancel-deadline", "inf"],
            "acp-bridge: --cancel-deadline: expected a number of seconds from 0 to 3600, got 'inf'",
        ),
        (
            ["--cancel-deadline", "nan"],
            "acp-bridge: --cancel-deadline: expected a number of seconds from 0 to 3600, got 'nan'",
        ),
        (
            ["--cancel-deadline", "3600.5"],
            "acp-bridge: --cancel-deadline: expected a number of seconds from 0 to 3600, "
            "got '3600.5'",
        ),
        (
            ["serve", "--idle-timeout", "-1"],
            "acp-bridge serve: --idle-timeout: expected a number of seconds from 0 to 86400, "
            "got '-1'",
        ),
        (
            # A tool with no time at all could never run: 0 is refused, not
            # taken for the default.
            ["--tool-timeout", "0"],
            "acp-bridge: --tool-timeout: expected a number of seconds above 0 to 86400, got '0'",
        ),
        (
            ["--max-steps", "0"],
            "acp-bridge: --max-steps: expected a whole number from 1 to 10000, got '0'",
        ),
        (
            ["--max-steps", "2.5"],
            "acp-bridge: --max-steps: expected a whole number from 1 to 10000, got '2.5'",
        ),
        (
            ["demo", "--stop-after", "1e9"],
            "acp-bridge demo: --stop-after: expected a whole number from 1 to 1000000, got '1e9'",
        ),
        (
            ["--context-window", "0"],
            "acp-bridge: --context-window: expected a whole number from 1 to 100000000, got '0'",
        ),
        (
            ["--compact-threshold", "80"],
            "acp-bridge: --compact-threshold: expected a fraction from 0.1 to 1, got '80'",
        ),
        (
            ["serve", "--compact-threshold", "nan"],
            "acp-bridge serve: --compact-threshold: expected a fraction from 0.1 to 1, got 'nan'",
        ),
    ],
)
def test_a_bad_number_is_refused_in_the_users_terms(
    tmp_path: Path, args: list[str], message: str
) -> None:
    run = _run(*args, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert message in run.stderr.splitlines()
    assert "_non_negative" not in run.stderr
    assert "invalid" not in run.stderr


def test_the_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    # The options parse; the command then fails for its own reason (no such session).
    run = _run(
        "--cancel-deadline",
        "3600",
        "--idle-timeout",
        "0",
        "--max-steps",
        "10000",
        "history",
        "--state-dir",
        str(tmp_path),
        "sess_none",
        cwd=tmp_path,
    )
    assert run.returncode == 1
    assert run.stderr == f"acp-bridge: no session 'sess_none' in {tmp_path}\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1X", "acp-bridge: --pass-env: '1X' is not an environment variable name"),
        ("A, 1X", "acp-bridge: --pass-env: '1X' is not an environment variable name"),
        (",", "acp-bridge: --pass-env: expected a variable name, got nothing"),
    ],
)
def test_a_bad_pass_env_name_is_refused(tmp_path: Path, value: str, message: str) -> None:
    run = _run("--pass-env", value, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert message in run.stderr.splitlines()


@pytest.mark.parametrize("url", ["not a url", "api.openai.com/v1", "ftp://example.com", "http://"])
def test_a_bad_base_url_is_refused_at_start(tmp_path: Path, url: str) -> None:
    """Refused before anything starts, not at the first prompt after its retries."""
    run = _run("--provider", "openai", "--base-url", url, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines().count(
        "acp-bridge: --base-url: expected an http:// or https:// URL with a host "
        f"(like https://api.openai.com/v1), got {url!r}"
    )


def _editor_session(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``initialize`` and ``session/new`` sent as an editor sends them, then stdin's end."""
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(cwd), "mcpServers": []},
        },
    ]
    return subprocess.run(
        [sys.executable, "-m", "acp_bridge", *args],
        input="".join(json.dumps(f) + "\n" for f in frames),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("serve", [[], ["serve"]])
def test_a_bad_option_is_the_error_of_session_new(tmp_path: Path, serve: list[str]) -> None:
    """An editor that starts the agent with a bad option gets ``initialize``
    answered and ``session/new`` refused with the option's message (as for a bad
    script); stderr says it, no session is made, and the exit status is 2."""
    state = tmp_path / "state"
    run = _editor_session(*serve, "--state-dir", str(state), "--max-steps", "0", cwd=tmp_path)
    assert run.returncode == 2
    answers = {m["id"]: m for m in map(json.loads, run.stdout.splitlines())}
    assert set(answers) == {1, 2}
    assert answers[1]["result"]["protocolVersion"] == 1
    error = answers[2]["error"]
    assert error["data"]["kind"] == "startup"
    prog = "acp-bridge serve" if serve else "acp-bridge"
    message = f"{prog}: --max-steps: expected a whole number from 1 to 10000, got '0'"
    assert message in error["message"]
    assert message in run.stderr.splitlines()
    assert not state.exists() or not any(state.rglob("*.jsonl"))


def test_a_state_dir_that_cannot_be_made_is_the_error_of_session_new(tmp_path: Path) -> None:
    """Nothing checks the state directory at start-up: ``session/new`` says why
    it cannot make the log there, and the agent keeps answering."""
    (tmp_path / "file").write_text("")
    state = tmp_path / "file" / "state"
    run = _editor_session("--provider", "fake", "--state-dir", str(state), cwd=tmp_path)
    assert run.returncode == 0
    answers = {m["id"]: m for m in map(json.loads, run.stdout.splitlines())}
    assert answers[1]["result"]["protocolVersion"] == 1
    error = answers[2]["error"]
    assert error["code"] == -32603
    assert error["data"]["path"].startswith(str(state))
    assert error["message"].startswith("Cannot create the session log: ")


def test_a_bad_option_of_another_subcommand_exits_at_once(tmp_path: Path) -> None:
    """Only the agent keeps answering: ``show`` with a bad option is no editor's."""
    run = _editor_session("show", "--bogus", "sess_x", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert "acp-bridge: unrecognized arguments: --bogus" in run.stderr.splitlines()


def test_a_bad_base_url_in_a_profile_is_the_error_of_session_new(tmp_path: Path) -> None:
    """From a config file it is a start-up error: session/new says it, and the
    process exits 2 when the editor closes stdin (as for a bad script)."""
    config = tmp_path / "bridge.toml"
    config.write_text('[profiles.default]\nprovider = "openai"\nbase_url = "localhost:8080"\n')
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    run = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "--config", str(config), "--state-dir", str(tmp_path)],
        input="".join(json.dumps(f) + "\n" for f in frames),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    answers = {m["id"]: m for m in map(json.loads, run.stdout.splitlines())}
    assert "result" in answers[1]
    error = answers[2]["error"]
    assert error["code"] == -32603
    assert error["data"]["kind"] == "startup"
    assert "base_url: expected an http:// or https:// URL with a host" in error["message"]
    assert "'localhost:8080'" in error["message"]


# Every subcommand the README lists, with arguments that end it at once (or with a
# plain "not found"), the common options after its name.
SUBCOMMANDS = [
    ["serve"],
    ["setup"],
    ["logout"],
    ["demo", "--stop-after", "1"],
    ["history", "sess_unknown"],
    ["sessions"],
    ["show", "sess_unknown"],
    ["permissions"],
    ["check", "--only", "initialize.version"],
]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=[c[0] for c in SUBCOMMANDS])
def test_every_subcommand_takes_state_dir_and_log_level(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_BRIDGE_CONFIG_DIR", str(tmp_path / "config"))
    name, *rest = command
    done = _run(
        name, "--state-dir", str(tmp_path / "state"), "--log-level", "info", *rest, cwd=tmp_path
    )
    assert "unrecognized arguments" not in done.stderr
    assert "--state-dir" not in done.stderr
    assert "--log-level" not in done.stderr
    if name == "setup":  # got as far as asking for a terminal
        assert "asks questions" in done.stderr
    else:
        assert done.returncode != 2, done.stderr
    if name == "check":
        assert done.returncode == 0, done.stdout + done.stderr
        assert "initialize.version" in done.stdout


def test_check_refuses_a_bad_log_level(tmp_path: Path) -> None:
    done = _run("check", "--log-level", "loud", cwd=tmp_path)
    assert done.returncode == 2
    assert "--log-level" in done.stderr
    assert "'loud'" in done.stderr
