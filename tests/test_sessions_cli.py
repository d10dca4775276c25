"""``acp-bridge sessions``, ``acp-bridge show`` and ``acp-bridge history`` with a
wrong id, through the real command line, on the stored format-1 fixture."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "log-v1.jsonl"
SID = "sess_5384538e66cc4a578c99b35a8e929a3a"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_bridge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def state(tmp_path: Path) -> str:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    shutil.copy(FIXTURE, sessions / f"{SID}.jsonl")
    return str(tmp_path)


def test_sessions_lists_id_turns_size_ending_cwd_and_title(tmp_path: Path) -> None:
    result = run("sessions", "--state-dir", state(tmp_path))
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["SESSION", "UPDATED", "TURNS", "SIZE", "LAST", "TURN", "CWD", "TITLE"]
    cells = row.split()
    assert cells[0] == SID
    assert cells[3] == "4"  # turns
    assert cells[6] == "error"  # how the last turn ended (after the date, time and size)
    assert row.endswith("/home/user/project  Tell me a story.")


def test_show_prints_the_timeline(tmp_path: Path) -> None:
    result = run("show", SID, "--state-dir", state(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for expected in (
        f"session {SID}",
        'user: "Tell me a story."',
        'message, interrupted by Stop: reasoning "Keep it short."; text "Once upon a time,"',
        "turn ends: cancelled after",
        "tool call_1 read_file: unavailable",
        "turn 3  ",
        "(regenerates turn 2)",
        "attempt att_6601620187df4450: provider_error (4 text chars shown)",
        'request error: overloaded 529 "overloaded"',
        "turn ends: error after",
    ):
        assert expected in out, expected


def test_history_with_a_wrong_id_lists_the_nearest(tmp_path: Path) -> None:
    directory = state(tmp_path)
    typo = SID[:-1] + "b"
    result = run("history", typo, "--state-dir", directory)
    assert result.returncode == 1
    assert f"no session {typo!r}" in result.stderr
    assert f"did you mean:\n  {SID}\n" in result.stderr
    prefix = run("show", SID[:9], "--state-dir", directory)
    assert prefix.returncode == 1
    assert SID in prefix.stderr
    good = run("history", SID, "--state-dir", directory)
    assert good.returncode == 0
    assert '"interrupted": true' in good.stdout


def test_show_rounds_a_retry_wait(tmp_path: Path) -> None:
    directory = state(tmp_path)
    log = tmp_path / "sessions" / f"{SID}.jsonl"
    # The fixture's overloaded request was retried after a computed (jittered) wait.
    log.write_text(
        log.read_text().replace(
            '"request_id":null}}',
            '"request_id":null},"retrying":true,"retry_attempt":1,'
            '"retry_delay":0.44082993995546754}',
        )
    )
    result = run("show", SID, "--state-dir", directory)
    assert result.returncode == 0, result.stderr
    assert 'request error: overloaded 529 "overloaded", retry 1 in 0.44s' in result.stdout
    assert "0.4408" not in result.stdout
