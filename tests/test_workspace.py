"""The workspace seam (`acp_bridge.tools.workspace`): confinement above it, the
choice of a session's workspace, and local commands (`LocalWorkspace`), which
no ACP v1 editor reaches through the subprocess (the editor's terminal, or no
command at all, is what v1 gets)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import wait_until

from acp_bridge.tools import ToolContext, ToolError
from acp_bridge.tools.base import ClientCapabilities
from acp_bridge.tools.command import RunCommand
from acp_bridge.tools.editor_workspace import EditorWorkspace, choose
from acp_bridge.tools.local_workspace import LOCAL_FILES, LocalWorkspace
from acp_bridge.tools.workspace import NO_TERMINAL, OUTPUT_BYTE_LIMIT, Call, Target, Terminal

pytestmark = pytest.mark.anyio


async def _unused(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"no editor request expected: {method}")


def _ctx(ws: Path, workspace: Any = None, **fields: Any) -> ToolContext:
    return ToolContext(
        session_id="s",
        cwd=str(ws),
        roots=[str(ws)],
        capabilities=ClientCapabilities(),
        call_id="c",
        request=_unused,
        settle=_unused,
        cleanup=_unused,
        update=lambda fields: None,
        stopped=lambda: False,
        workspace=workspace,
        **fields,
    )


class Recording:
    """A workspace that records what reaches it (a stand-in for any other)."""

    def __init__(self) -> None:
        self.targets: list[Target] = []

    async def read_text(
        self, call: Call, target: Target, line: int | None, limit: int | None
    ) -> str:
        self.targets.append(target)
        return "text"

    async def write_text(self, call: Call, target: Target, content: str) -> None:
        self.targets.append(target)

    async def start_command(self, call: Call, command: str, cwd: str) -> Terminal:
        raise AssertionError("no command here")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


async def test_confinement_is_above_the_seam_so_every_workspace_gets_only_checked_targets(
    ws: Path, tmp_path: Path
) -> None:
    """A path outside the session's directories, a system path and a FIFO never
    reach the workspace; one inside reaches it resolved (symlinks followed),
    spelled from the session's root."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "victim.txt").write_text("outside\n")
    (ws / "leak.txt").symlink_to(outside / "victim.txt")
    (ws / "real.txt").write_text("inside\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    os.mkfifo(ws / "pipe")
    recording = Recording()
    ctx = _ctx(ws, recording)
    for path, why in [
        (str(ws / "leak.txt"), "outside the session's directories"),
        ("/proc/self/environ", "system path"),
        (str(ws / "pipe"), "a FIFO"),
    ]:
        with pytest.raises(ToolError, match=why):
            await ctx.read_text(path)
        with pytest.raises(ToolError, match=why):
            await ctx.write_text(path, "x")
    assert recording.targets == []
    assert await ctx.read_text(str(ws / "alias.txt")) == "text"
    (target,) = recording.targets
    assert target.path == str(ws / "alias.txt")
    assert target.real == str((ws / "real.txt").resolve())
    assert target.spelled == str(ws / "real.txt")
    # Allowed for the call (by the user, through the runner): it reaches the workspace.
    ctx.allowed = (str(outside / "victim.txt"),)
    await ctx.write_text(str(ws / "leak.txt"), "x")
    assert recording.targets[-1].real == str(outside / "victim.txt")


def test_the_workspace_is_chosen_from_what_the_editor_advertised() -> None:
    assert choose(ClientCapabilities()) is LOCAL_FILES
    assert not LOCAL_FILES.commands
    caps = ClientCapabilities(read_text_file=True, terminal=True)
    assert choose(caps) == EditorWorkspace(True, False, True)
    default = _ctx(Path("/tmp")).workspace
    assert default is LOCAL_FILES


async def test_without_a_terminal_no_command_runs(ws: Path) -> None:
    for workspace in (LOCAL_FILES, EditorWorkspace(True, True, False)):
        with pytest.raises(ToolError) as caught:
            await workspace.start_command(_ctx(ws, workspace), "touch ran", str(ws))
        assert str(caught.value) == NO_TERMINAL
    assert not (ws / "ran").exists()


async def _run(ctx: ToolContext, command: str, **args: Any) -> Any:
    tool = RunCommand()
    return await tool.run(tool.args_model.model_validate({"command": command, **args}), ctx)


async def test_a_local_command_gives_its_output_and_exit_status_with_secrets_blanked(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_KEY", "sk-very-secret")
    ctx = _ctx(ws, LocalWorkspace(), hidden_env=("MY_API_KEY",))
    command = 'echo "key=[$MY_API_KEY]"; echo oops >&2; readlink /proc/self/fd/0; pwd; exit 3'
    # The bridge's stdin is the editor's pipe: a command never gets it.
    saved, (read_end, write_end) = os.dup(0), os.pipe()
    os.dup2(read_end, 0)
    try:
        out = await _run(ctx, command)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert out.text.splitlines() == [
        f"$ {command}",
        "key=[]",
        "oops",
        "/dev/null",
        str(ws),
        "[exit code 3]",
    ]
    assert out.is_error
    assert out.raw_output == {
        "exitCode": 3,
        "signal": None,
        "interrupted": False,
        "output_chars": len(f"key=[]\noops\n/dev/null\n{ws}\n"),
    }
    assert out.content == []
    ok = await _run(ctx, "true")
    assert not ok.is_error
    assert ok.raw_output["exitCode"] == 0


async def test_a_local_command_keeps_the_last_bytes_of_a_long_output(ws: Path) -> None:
    ctx = _ctx(ws, LocalWorkspace(), max_output=10**7)
    out = await _run(ctx, f"head -c {OUTPUT_BYTE_LIMIT + 1000} /dev/zero | tr '\\0' a; echo END")
    assert "only the last 262144 bytes were kept" in out.text
    assert out.raw_output["output_chars"] == OUTPUT_BYTE_LIMIT
    assert out.text.split("\n")[1].endswith("aEND")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie of ours is gone too (reaped by nobody: it was no child of ours).
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


async def test_a_timed_out_local_command_is_killed_with_what_it_left_running(ws: Path) -> None:
    ctx = _ctx(ws, LocalWorkspace())
    out = await _run(ctx, "sleep 60 & echo $! > child; echo started; wait", timeout_s=1)
    child = int((ws / "child").read_text())
    assert "started" in out.text
    assert "timed out after 1 s: the command was killed" in out.text
    with anyio.fail_after(10):
        await wait_until(lambda: _gone(child))


async def test_a_stopped_local_command_is_killed_and_its_output_is_the_partial_result(
    ws: Path,
) -> None:
    ctx = _ctx(ws, LocalWorkspace())
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                # "printed" is in the pipe before the pid file appears.
                await _run(ctx, "echo printed; echo $$ > pid.tmp; mv pid.tmp pid; sleep 60")

            tg.start_soon(run)
            await wait_until((ws / "pid").exists)
            tg.cancel_scope.cancel()
    assert ctx.partial is not None
    assert "printed" in ctx.partial.text
    assert "interrupted by the user: the command was killed" in ctx.partial.text
    assert ctx.partial.raw_output == {
        "exitCode": None,
        "signal": signal.Signals.SIGKILL.name,
        "interrupted": True,
        "output_chars": len("printed\n"),
    }
    pid = int((ws / "pid").read_text())
    with anyio.fail_after(10):
        await wait_until(lambda: _gone(pid))


async def test_what_a_local_command_leaves_in_the_background_ends_with_it(ws: Path) -> None:
    """A command that exits leaving a child behind (holding its output open) is
    answered, and the child is killed when the terminal is released."""
    ctx = _ctx(ws, LocalWorkspace())
    out = await _run(ctx, "sleep 60 & echo $! > child; echo done")
    assert out.text.splitlines()[1:] == ["done", "[exit code 0]"]
    child = int((ws / "child").read_text())
    with anyio.fail_after(10):
        await wait_until(lambda: _gone(child))
