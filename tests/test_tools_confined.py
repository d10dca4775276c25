"""Confinement of the tools (I7), through the real subprocess: symlinks that
lead out of the session's directories, a symlink swapped in while the user is
asked for a write, and special files in the workspace.

The scripted model calls the tools; `WorkspaceEditor` plays the editor and
answers the permission requests, here and there after changing the
workspace under the bridge's feet.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema
from support.harness import report, tool_call, update_seen, wait_until
from test_tools import REPORT, Played
from test_tools import play as play_in_either_mode
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient, PromptResult

pytestmark = pytest.mark.anyio

# Every test of this file runs the real command (a FIFO opened in this process
# would block the test itself).
play = functools.partial(play_in_either_mode, mode="subprocess")

PLANTED = "sk-planted-confinement-0123456789"
OUTSIDE_TEXT = "the outside secret"
# An editor that reads files but does not write them: writes use the local disk.
READ_ONLY_FS: dict[str, Any] = {"fs": {"readTextFile": True}}


def results_by_id(result: PromptResult) -> dict[str, dict[str, Any]]:
    return {r["tool_call_id"]: r for r in report(result)["tool_results"]}


def asked_for(played: Played) -> list[str]:
    """The tool call ids permission was asked for, in order."""
    asked = played.sent_by_agent("session/request_permission")
    return [m["params"]["toolCall"]["toolCallId"] for m in asked]


def everything_written(played: Played) -> str:
    """The wire transcript and every file of the state directory (logs), as text."""
    files = [p.read_text(errors="replace") for p in played.run.state_dir.rglob("*") if p.is_file()]
    return json.dumps(played.run.client.transcript) + "".join(files)


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A folder outside the workspace, with a secret and a link into /proc."""
    there = tmp_path / "elsewhere"
    there.mkdir()
    (there / "secret.txt").write_text(OUTSIDE_TEXT + "\n")
    (there / "env").symlink_to("/proc/self/environ")
    return there


def links_out(elsewhere: Path) -> Callable[[WorkspaceEditor], None]:
    def setup(editor: WorkspaceEditor) -> None:
        (editor.root / "env.txt").symlink_to("/proc/self/environ")
        (editor.root / "notes.txt").symlink_to(elsewhere / "secret.txt")
        (editor.root / "plain.txt").write_text("a plain secret, sk- free\n")

    return setup


async def test_symlinks_out_of_the_workspace_are_asked_for_and_proc_is_never_read(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch, acp_schema: AcpSchema
) -> None:
    """env.txt -> /proc/self/environ (with a key in the bridge's environment) and
    notes.txt -> an outside file, on the local disk: the walkers skip both with
    a note, read_file asks for notes.txt (saying where it leads) and refuses
    env.txt without asking, and an allowed outside folder is searched without
    its own link into /proc."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    pattern = "secret|sk-"
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "search_text", pattern=pattern),
                    tool_call("call_2", "find_files", pattern="*.txt"),
                    tool_call("call_3", "read_file", path="env.txt"),
                    tool_call("call_4", "read_file", path="notes.txt"),
                    tool_call("call_5", "read_file", path="/proc/self/environ"),
                    tool_call("call_6", "search_text", pattern=pattern, path=str(elsewhere)),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["reject_once", "allow_once"]
        return [await client.prompt(sid, "Look around")]

    played = await play(tmp_path, script, turns, capabilities={}, editor_setup=links_out(elsewhere))
    ws = played.workspace
    assert PLANTED not in everything_written(played)
    results = results_by_id(played.results[0])
    search, find = results["call_1"]["text"], results["call_2"]["text"]
    assert search.splitlines()[0] == f"{ws / 'plain.txt'}:1: a plain secret, sk- free"
    assert OUTSIDE_TEXT not in search
    # Skipped, and said so.
    for text in (search, find):
        (outside_note,) = [line for line in text.splitlines() if "outside" in line]
        assert str(ws / "notes.txt") in outside_note
        (system_note,) = [line for line in text.splitlines() if "/proc" in line]
        assert str(ws / "env.txt") in system_note
    assert find.splitlines()[0] == str(ws / "plain.txt")
    # Asked only for notes.txt (rejected) and the outside folder (allowed).
    assert asked_for(played) == ["call_4", "call_6"]
    ask_notes = played.sent_by_agent("session/request_permission")[0]["params"]["toolCall"]
    shown = json.dumps(ask_notes["content"])
    assert f"which leads to {elsewhere / 'secret.txt'}" in shown
    for refused in ("call_3", "call_5"):
        assert results[refused]["is_error"]
        assert "is a system path" in results[refused]["text"]
    assert results["call_4"]["is_error"]
    assert OUTSIDE_TEXT not in results["call_4"]["text"]
    # The allowed folder: its secret is found, its link into /proc is not read.
    allowed = results["call_6"]["text"]
    assert allowed.splitlines()[0] == f"{elsewhere / 'secret.txt'}:1: {OUTSIDE_TEXT}"
    assert str(elsewhere / "env") in allowed.splitlines()[1]
    statuses = {c["tool_call_id"]: c["status"] for c in played.of_type("tool/call")}
    assert statuses["call_3"] == statuses["call_5"] == "refused"
    acp_schema.check_transcript(played.run.client.transcript)
    played.run.check_logs()


async def test_through_the_editor_the_resolved_path_is_sent_and_proc_never(
    tmp_path: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the editor's fs: env.txt is refused before any fs/read_text_file;
    notes.txt is asked for, and once allowed the editor is asked for the
    resolved path, the one the user allowed."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "read_file", path="env.txt"),
                    tool_call("call_2", "read_file", path="notes.txt"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Read them")]

    played = await play(
        tmp_path, script, turns, capabilities=FULL_CAPABILITIES, editor_setup=links_out(elsewhere)
    )
    assert PLANTED not in everything_written(played)
    assert played.editor.methods() == ["session/request_permission", "fs/read_text_file"]
    assert asked_for(played) == ["call_2"]
    assert played.editor.calls[1][1]["path"] == str(elsewhere / "secret.txt")
    results = results_by_id(played.results[0])
    assert "is a system path" in results["call_1"]["text"]
    assert results["call_2"]["text"] == OUTSIDE_TEXT + "\n"


# -- a symlink swapped in while the user is asked ------------------------------------


Swap = Callable[[], Awaitable[str]]


def swap_then_allow(change: Callable[[], None]) -> Swap:
    """A permission answer: change the workspace, then allow once."""

    async def answer() -> str:
        change()
        return "allow_once"

    return answer


def replace_by_link(path: Path, target: Path) -> Callable[[], None]:
    def change() -> None:
        if path.is_dir():
            path.rename(path.with_name(path.name + ".moved"))
        else:
            path.unlink()
        path.symlink_to(target)

    return change


@pytest.mark.parametrize("capabilities", [{}, READ_ONLY_FS], ids=["no-fs", "read-only-fs"])
async def test_a_file_swapped_for_a_symlink_while_asked_is_not_written_through(
    tmp_path: Path, elsewhere: Path, capabilities: dict[str, Any]
) -> None:
    """While the permission prompt is open, target.txt (write_file) and
    other.txt (edit_file) become symlinks to outside files; after "allow once"
    both calls fail, and the outside files are untouched."""
    victim = elsewhere / "victim.txt"
    victim.write_text("x = 1\n")
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "write_file", path="target.txt", content="new\n"),
                    tool_call(
                        "call_2", "edit_file", path="other.txt", old_text="x = 1", new_text="x = 2"
                    ),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        ws = editor.root
        editor.permission_answers = [
            swap_then_allow(replace_by_link(ws / "target.txt", victim)),
            swap_then_allow(replace_by_link(ws / "other.txt", victim)),
        ]
        return [await client.prompt(sid, "Write and edit")]

    played = await play(
        tmp_path,
        script,
        turns,
        files={"target.txt": "old\n", "other.txt": "x = 1\n"},
        capabilities=capabilities,
    )
    assert played.editor.served_answers == ["allow_once", "allow_once"]
    assert victim.read_text() == "x = 1\n"
    assert (played.workspace / "target.txt").is_symlink()
    results = results_by_id(played.results[0])
    for call_id in ("call_1", "call_2"):
        assert results[call_id]["is_error"], results[call_id]
        assert f"leads to {victim}, which is outside" in results[call_id]["text"]
    assert "fs/write_text_file" not in played.editor.methods()


async def test_a_parent_folder_swapped_for_a_symlink_while_asked_is_not_written_into(
    tmp_path: Path, elsewhere: Path
) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="sub/target.txt", content="new")]},
            REPORT,
        ]
    }

    def setup(editor: WorkspaceEditor) -> None:
        (editor.root / "sub").mkdir()

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = [
            swap_then_allow(replace_by_link(editor.root / "sub", elsewhere))
        ]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns, capabilities={}, editor_setup=setup)
    assert not (elsewhere / "target.txt").exists()
    (result,) = report(played.results[0])["tool_results"]
    assert result["is_error"]
    assert "outside the session's directories" in result["text"]


async def test_an_allowed_outside_file_swapped_after_the_grant_is_not_written_through(
    tmp_path: Path, elsewhere: Path
) -> None:
    """The user allowed the outside path out.txt; while asked, it became a
    symlink to another file: what was allowed is the path as resolved when
    asked, so the write is refused and the other file is untouched."""
    (elsewhere / "out.txt").write_text("old\n")
    other = elsewhere / "other.txt"
    other.write_text("keep me\n")
    out = elsewhere / "out.txt"
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path=str(out), content="new\n")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = [swap_then_allow(replace_by_link(out, other))]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns, capabilities={})
    assert asked_for(played) == ["call_1"]
    assert other.read_text() == "keep me\n"
    (result,) = report(played.results[0])["tool_results"]
    assert result["is_error"]
    assert f"leads to {other}" in result["text"]


@pytest.mark.parametrize("capabilities", [{}, FULL_CAPABILITIES], ids=["disk", "editor"])
async def test_an_allowed_outside_read_swapped_after_the_grant_is_refused(
    tmp_path: Path, elsewhere: Path, capabilities: dict[str, Any]
) -> None:
    """Reads too: public.txt is allowed, and swapped for a link to secret.txt
    while the user is asked; the read is refused, on the disk and through the
    editor (which is never asked for the file)."""
    public = elsewhere / "public.txt"
    public.write_text("public\n")
    script = {
        "responses": [
            {"events": [tool_call("call_1", "read_file", path=str(public))]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        secret = elsewhere / "secret.txt"
        editor.permission_answers = [swap_then_allow(replace_by_link(public, secret))]
        return [await client.prompt(sid, "Read it")]

    played = await play(tmp_path, script, turns, capabilities=capabilities)
    assert played.editor.methods() == ["session/request_permission"]
    (result,) = report(played.results[0])["tool_results"]
    assert result["is_error"]
    assert OUTSIDE_TEXT not in result["text"]
    assert f"leads to {elsewhere / 'secret.txt'}" in result["text"]


async def test_an_allowed_outside_file_is_written_in_place_keeping_its_mode(
    tmp_path: Path, elsewhere: Path
) -> None:
    out = elsewhere / "out.txt"
    out.write_text("old\n")
    out.chmod(0o640)
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path=str(out), content="new\n")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns, capabilities={})
    (result,) = report(played.results[0])["tool_results"]
    assert not result["is_error"], result
    assert out.read_text() == "new\n"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(elsewhere)) == ["env", "out.txt", "secret.txt"]  # no temporary file


# -- special files -------------------------------------------------------------------


def unblock(fifo: Path) -> None:
    """Open ``fifo`` for writing and close it: whoever is stuck opening it for
    reading gets through (and reads nothing).  Only for a bridge that failed."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # ENXIO: nobody is opening it
    os.close(fd)


@pytest.mark.parametrize("capabilities", [{}, FULL_CAPABILITIES], ids=["disk", "editor"])
async def test_a_fifo_is_refused_and_the_bridge_keeps_serving(
    tmp_path: Path, capabilities: dict[str, Any]
) -> None:
    """search_text skips the FIFO in the cwd with a note; read_file of it is a
    tool error, refused before it is opened (or handed to the editor);
    meanwhile the bridge answers another request at once (its event loop is
    never blocked)."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "search_text", pattern="milk"),
                    tool_call("call_2", "read_file", path="pipe"),
                ]
            },
            REPORT,
        ]
    }

    def setup(editor: WorkspaceEditor) -> None:
        os.mkfifo(editor.root / "pipe")
        # Should the bridge hand it over anyway, this editor does not open it either.
        editor.hang.add("fs/read_text_file")

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        box: dict[str, PromptResult] = {}

        async def prompt() -> None:
            box["result"] = await client.prompt(sid, "Read the pipe")

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(prompt)
                    await wait_until(update_seen(client, "tool_call_update"))
                    answer = await client.request(
                        "session/set_mode", {"sessionId": sid, "modeId": "ask"}
                    )
                    assert answer["result"] == {}
        finally:
            unblock(editor.root / "pipe")
        return [box["result"]]

    played = await play(
        tmp_path,
        script,
        turns,
        files={"notes.txt": "buy milk\n"},
        capabilities=capabilities,
        editor_setup=setup,
        extra=("--tool-timeout", "5"),
    )
    assert played.editor.calls == []
    ws = played.workspace
    results = results_by_id(played.results[0])
    search = results["call_1"]["text"].splitlines()
    assert search[0] == f"{ws / 'notes.txt'}:1: buy milk"
    assert "FIFOs, sockets or devices" in search[1]
    assert str(ws / "pipe") in search[1]
    assert results["call_2"]["is_error"]
    assert results["call_2"]["text"] == (
        f"read_file failed: {ws / 'pipe'} is a FIFO: only regular files are opened"
    )
