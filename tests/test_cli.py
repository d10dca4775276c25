"""The command line: options, the state directory, the demo, history, script errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_bridge.cli import build_parser
from acp_bridge.paths import ENV_STATE_DIR, read_small_file, resolve_state_dir

BRIDGE = [sys.executable, "-m", "acp_bridge"]


def run(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BRIDGE, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env
    )


def test_state_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_STATE_DIR, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert resolve_state_dir(None) == str(tmp_path / "xdg" / "acp-bridge")
    monkeypatch.setenv(ENV_STATE_DIR, str(tmp_path / "env"))
    assert resolve_state_dir(None) == str(tmp_path / "env")
    assert resolve_state_dir(str(tmp_path / "flag")) == str(tmp_path / "flag")
    monkeypatch.delenv(ENV_STATE_DIR)
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_state_dir(None) == str(tmp_path / "home" / ".local" / "state" / "acp-bridge")


@pytest.mark.parametrize(
    "argv",
    [
        ["--state-dir", "/a", "history", "sess_x"],
        ["history", "--state-dir", "/a", "sess_x"],
        ["history", "sess_x", "--state-dir", "/a"],
    ],
)
def test_state_dir_before_or_after_the_subcommand(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.state_dir == "/a"
    assert args.session_id == "sess_x"


def test_serve_options_before_or_after_serve() -> None:
    before = build_parser().parse_args(["--cancel-deadline", "2", "serve"])
    after = build_parser().parse_args(["serve", "--cancel-deadline", "2"])
    assert before.cancel_deadline == after.cancel_deadline == 2.0


def test_help_documents_every_option() -> None:
    text = run("--help").stdout
    for option in (
        "--state-dir",
        "--log-level",
        "--provider",
        "--script",
        "--cancel-deadline",
        "--idle-timeout",
        "--max-steps",
        "serve",
        "demo",
        "history",
    ):
        assert option in text, option
    assert "--stop-after" in run("demo", "--help").stdout
    assert "--stop-after: expected a whole number" in run("demo", "--stop-after", "0").stderr
    assert "SESSION_ID" in run("history", "--help").stdout


def test_bad_script_is_reported_with_its_path_and_exit_status_2(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"responses": [{"events": [{"tetx": "hi"}]}]}))
    result = run("--provider", "fake", "--script", str(script), "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 2
    assert result.stdout == ""  # stdout is for ACP messages only
    assert f"{script}: responses[0].events[0]" in result.stderr
    assert "Traceback" not in result.stderr


def test_demo_runs_end_to_end_with_the_default_state_dir(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in (ENV_STATE_DIR, "XDG_STATE_HOME")}
    env["HOME"] = str(tmp_path)
    result = run("demo", env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "■ Stopped" in out
    assert "the editor got stopReason 'cancelled'; nothing arrived after it" in out
    assert "exactly the text you saw; interrupted: true" in out
    sessions = tmp_path / ".local" / "state" / "acp-bridge" / "sessions"
    (log,) = sessions.glob("*.jsonl")
    assert str(log) in out
    history = run("history", log.stem, env=env)
    assert history.returncode == 0, history.stderr
    messages = json.loads(history.stdout)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1]["interrupted"] is True
    assert messages[1]["content"][-1]["text"] in out


@pytest.mark.parametrize("stop_after", ["1", "6"])
def test_a_demo_stopped_while_thinking_claims_no_text_it_did_not_show(
    tmp_path: Path, stop_after: str
) -> None:
    result = run("demo", "--stop-after", stop_after, "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    stopped = out[: out.index("■ Stopped")]
    assert "(thinking)" in stopped
    assert "Agent:" not in stopped  # no answer text was shown before the Stop
    assert "✓" not in out
    assert "exactly the text you saw" not in out
    assert "no answer text was shown" in out
    assert "--stop-after 7 or more" in out


def test_a_demo_stopped_in_the_answer_checks_the_text_shown(tmp_path: Path) -> None:
    result = run("demo", "--stop-after", "7", "--state-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Agent: Once" in out[: out.index("■ Stopped")]
    assert "✓ the model's next request held the interrupted answer (exactly the text you saw" in out


def test_history_of_an_unknown_or_bad_session(tmp_path: Path) -> None:
    missing = run("history", "sess_nope", "--state-dir", str(tmp_path))
    assert missing.returncode == 1
    assert "no session 'sess_nope'" in missing.stderr
    bad = run("history", "../etc/passwd", "--state-dir", str(tmp_path))
    assert bad.returncode == 2


def test_library_names_resolve_and_do_not_slow_the_command_line() -> None:
    import acp_bridge

    for name in acp_bridge.__all__:
        assert getattr(acp_bridge, name) is not None, name
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, acp_bridge.cli; print('acp_bridge.server' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "False"


def test_small_files_are_read_only_when_regular_and_small(tmp_path: Path) -> None:
    """The reader of the config, setup and permissions files: a link to a
    regular file is followed (dotfiles); a FIFO (not waited on), a device, a
    directory or a file over the limit is refused saying why."""
    real = tmp_path / "real.toml"
    real.write_bytes(b"x = 1\n")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    assert read_small_file(str(link)) == b"x = 1\n"
    assert read_small_file(str(real), limit=6) == b"x = 1\n"
    with pytest.raises(OSError, match="larger than 5 bytes"):
        read_small_file(str(real), limit=5)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for special in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(OSError, match="not a regular file") as caught:
            read_small_file(str(special))
        assert caught.value.filename == str(special)
    with pytest.raises(FileNotFoundError):
        read_small_file(str(tmp_path / "missing"))
