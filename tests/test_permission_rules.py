"""Permissions that remember: an "always" answer in one session applies to new
sessions of the same project (the session's cwd), also in a new process, and
not in another project nor to a path outside the session's directories;
``acp-bridge permissions`` lists, forgets and resets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_schema import AcpSchema
from harness import SessionSnapshot, normalize, run_bridge, tool_call, wait_until, write_script
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import AcpClient
from acp_bridge.tools import rules_store

pytestmark = pytest.mark.anyio

NO_FS = {"fs": {"readTextFile": False, "writeTextFile": False}}


def script(outside: Path) -> dict[str, Any]:
    return {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="note.txt", content="hi")]},
            {"events": [{"text": "Written."}]},
            {"events": [tool_call("call_2", "write_file", path=str(outside), content="x")]},
            {"events": [{"text": "Tried."}]},
        ],
        "when_exhausted": "repeat_last",
    }


class Asked:
    """Answers permission requests from ``answers`` and keeps what was asked."""

    def __init__(self, client: AcpClient, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []
        client.handlers["session/request_permission"] = self.answer

    async def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": self.answers.pop(0)}}


def run_cli(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_bridge", "permissions", "--state-dir", str(state), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def cli(state: Path, *args: str) -> str:
    result = run_cli(state, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_always_applies_to_new_sessions_of_the_project_only(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    one, other = tmp_path / "project", tmp_path / "elsewhere"
    one.mkdir()
    other.mkdir()
    outside = other / "outside.txt"
    state = tmp_path / "state"
    path = write_script(tmp_path, script(outside))
    rules_file = state / rules_store.FILE_NAME

    async def first(client: AcpClient) -> None:
        asked = Asked(client, "allow_always")
        await client.initialize(NO_FS)
        sid = await client.new_session(str(one))
        assert (await client.prompt(sid, "Write a note")).stop_reason == "end_turn"
        assert len(asked.asked) == 1
        # Kept off the event loop: wait for the file (a hang guard, not a delay).
        await wait_until(rules_file.exists)

    await run_bridge(path, state, first)
    assert (one / "note.txt").read_text() == "hi"
    (one / "note.txt").unlink()
    stored = json.loads(rules_file.read_text())
    assert stored["projects"] == {str(one.resolve()): {"write_file": "allow_always"}}
    assert rules_file.stat().st_mode & 0o777 == 0o600

    seen: dict[str, Any] = {}

    async def second(client: AcpClient) -> None:
        asked = Asked(client, "reject_once", "reject_once")
        await client.initialize(NO_FS)
        # The same project, a new session in a new process: it runs without asking.
        same = await client.new_session(str(one))
        await client.prompt(same, "Write a note")
        seen["same"] = len(asked.asked)
        # The rule never covers a path outside the session's directories.
        await client.prompt(same, "Write outside")
        seen["outside"] = [a["toolCall"]["toolCallId"] for a in asked.asked]
        # Another project: asked.
        elsewhere = await client.new_session(str(other))
        await client.prompt(elsewhere, "Write a note")
        seen["elsewhere"] = len(asked.asked)

    run = await run_bridge(path, state, second, mode="inprocess")
    run.check_logs()
    assert seen["same"] == 0
    assert (one / "note.txt").read_text() == "hi"
    assert seen["outside"] == ["call_2"]
    assert not outside.exists()
    assert seen["elsewhere"] == 2
    assert not (other / "note.txt").exists()
    acp_schema.check_transcript(run.client.transcript)
    wire = normalize(
        [list(entry) for entry in run.client.transcript], paths={str(tmp_path): "<tmp>"}
    )
    assert wire == snapshot.use_extension(SessionSnapshot)


async def test_a_sessions_rule_stays_in_the_project_it_was_given_in(tmp_path: Path) -> None:
    """A session's "always" rule, restored from its log by a fork, a resume or
    a load, applies only when the session is opened in the cwd the rule was
    given in, not in another project."""
    one, other = tmp_path / "project", tmp_path / "elsewhere"
    one.mkdir()
    other.mkdir()
    state = tmp_path / "state"
    write_note = [
        {"events": [tool_call("call_1", "write_file", path="note.txt", content="hi")]},
        {"events": [{"text": "Written."}]},
    ]
    path = write_script(tmp_path, {"responses": write_note * 8, "when_exhausted": "error"})
    first: dict[str, str] = {}

    async def give(client: AcpClient) -> None:
        asked = Asked(client, "allow_always")
        await client.initialize(NO_FS)
        first["sid"] = await client.new_session(str(one))
        await client.prompt(first["sid"], "Write a note")
        assert len(asked.asked) == 1

    await run_bridge(path, state, give)
    # Only the session's own record of the rule is left (not the project's file).
    (state / rules_store.FILE_NAME).unlink()
    sid = first["sid"]
    seen: dict[str, int] = {}

    async def asked_after(client: AcpClient, asked: Asked, sid: str, name: str) -> None:
        before = len(asked.asked)
        assert (await client.prompt(sid, "Write a note")).stop_reason == "end_turn"
        seen[name] = len(asked.asked) - before

    async def reopen(client: AcpClient) -> None:
        asked = Asked(client, *["reject_once"] * 4)
        await client.initialize(NO_FS)
        fork = {"sessionId": sid, "mcpServers": []}
        here = await client.request("session/fork", {**fork, "cwd": str(one)})
        await asked_after(client, asked, here["result"]["sessionId"], "fork here")
        there = await client.request("session/fork", {**fork, "cwd": str(other)})
        await asked_after(client, asked, there["result"]["sessionId"], "fork elsewhere")
        resumed = await client.request("session/resume", {**fork, "cwd": str(other)})
        assert "result" in resumed
        await asked_after(client, asked, sid, "resume elsewhere")

    await run_bridge(path, state, reopen)

    async def load(client: AcpClient) -> None:
        asked = Asked(client, "reject_once")
        await client.initialize(NO_FS)
        loaded = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(other), "mcpServers": []}
        )
        assert "result" in loaded
        await asked_after(client, asked, sid, "load elsewhere")

    await run_bridge(path, state, load)
    assert seen == {
        "fork here": 0,  # the rule came along, in its own project
        "fork elsewhere": 1,
        "resume elsewhere": 1,
        "load elsewhere": 1,
    }
    assert not (other / "note.txt").exists()


def test_the_permissions_command(tmp_path: Path) -> None:
    state = tmp_path / "state"
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    assert cli(state) == "No remembered permissions.\n"
    rules_store.remember(str(state), str(one), "write_file", "allow_always")
    rules_store.remember(str(state), str(one), "mcp__db__query", "reject_always")
    rules_store.remember(str(state), str(two), "write_file", "reject_always")
    assert cli(state) == (
        f"{one.resolve()}\n  reject  mcp__db__query\n  allow   write_file\n"
        f"{two.resolve()}\n  reject  write_file\n"
    )
    assert cli(state, "--project", str(two)) == f"{two.resolve()}\n  reject  write_file\n"
    assert cli(state, "--forget", "write_file", "--project", str(one)) == (
        "Forgot write_file in 1 project.\n"
    )
    assert rules_store.rules_for(str(state), str(one)) == {"mcp__db__query": "reject_always"}
    assert rules_store.rules_for(str(state), str(two)) == {"write_file": "reject_always"}
    assert cli(state, "--reset") == "Forgot every remembered permission.\n"
    assert cli(state) == "No remembered permissions.\n"
    missing = run_cli(state, "--forget", "nothing")
    assert missing.returncode == 1
    assert "no remembered permission for nothing" in missing.stderr


def test_an_unreadable_file_counts_as_empty(tmp_path: Path) -> None:
    (tmp_path / rules_store.FILE_NAME).write_text("{not json")
    assert rules_store.rules_for(str(tmp_path), str(tmp_path)) == {}
    rules_store.remember(str(tmp_path), str(tmp_path), "run_command", "allow_always")
    assert rules_store.rules_for(str(tmp_path), str(tmp_path)) == {"run_command": "allow_always"}


def _spoil(rules_file: Path, kind: str) -> None:
    rules_file.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(rules_file)
    else:
        rules_file.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_the_permissions_command_with_a_special_file(tmp_path: Path, kind: str) -> None:
    """A FIFO (whose open would wait for a writer) or an endless device in
    place of permissions.json counts as no rules, saying why."""
    state = tmp_path / "state"
    _spoil(state / rules_store.FILE_NAME, kind)
    result = run_cli(state)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "No remembered permissions.\n"
    assert "not a regular file" in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
async def test_a_session_with_a_special_permissions_file(tmp_path: Path, kind: str) -> None:
    """The bridge neither freezes nor balloons: the session asks as if there
    were no rules, and an "always" answer replaces the special file."""
    project = tmp_path / "project"
    project.mkdir()
    state = tmp_path / "state"
    rules_file = state / rules_store.FILE_NAME
    _spoil(rules_file, kind)

    async def play(client: AcpClient) -> None:
        asked = Asked(client, "allow_always")
        await client.initialize(NO_FS)
        sid = await client.new_session(str(project))
        assert (await client.prompt(sid, "Write a note")).stop_reason == "end_turn"
        assert len(asked.asked) == 1
        await wait_until(rules_file.is_file)

    path = write_script(tmp_path, script(tmp_path / "out.txt"))
    run = await run_bridge(path, state, play, stderr=tmp_path / "stderr.txt")
    assert (project / "note.txt").read_text() == "hi"
    assert not rules_file.is_symlink()
    assert json.loads(rules_file.read_text())["projects"] == {
        str(project.resolve()): {"write_file": "allow_always"}
    }
    assert "not a regular file" in run.stderr
