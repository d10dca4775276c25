"""Session logs are private to their user (invariant I4).

Logs hold prompts and the files embedded in them: every folder the bridge
creates is 0700 and every log 0600, whatever the umask it runs under, and a
folder that already exists keeps its mode.  Tested through the real
subprocess, for each way the state folder is chosen.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from support.bridge import running_bridge

from acp_bridge.client import bridge_command

pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="POSIX file modes"),
    pytest.mark.anyio,
]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def run_one_turn(tmp_path: Path, env: dict[str, str], umask: int, *args: str) -> None:
    command = bridge_command("--provider", "fake", *args)
    async with running_bridge(command, env=env, umask=umask) as client:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        assert (await client.prompt(session, "Hi", settle=0)).stop_reason == "end_turn"
        assert await client.finish() == 0


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("XDG_STATE_HOME", "ACP_BRIDGE_STATE_DIR")
    }
    env["HOME"] = str(tmp_path / "home")
    return env


@pytest.mark.parametrize("umask", [0o022, 0o000])
async def test_the_default_state_folder_and_its_logs_are_private(
    tmp_path: Path, umask: int
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    await run_one_turn(tmp_path, base_env(tmp_path), umask)
    for folder in (
        ".local",
        ".local/state",
        ".local/state/acp-bridge",
        ".local/state/acp-bridge/sessions",
    ):
        assert mode(home / folder) == 0o700, folder
    logs = list((home / ".local/state/acp-bridge/sessions").glob("*.jsonl"))
    assert len(logs) == 1
    assert mode(logs[0]) == 0o600
    # An existing folder is not changed.
    assert mode(home) == 0o755


@pytest.mark.parametrize("umask", [0o022, 0o000])
async def test_xdg_and_explicit_state_folders_are_private(tmp_path: Path, umask: int) -> None:
    env = base_env(tmp_path)
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg" / "state")
    await run_one_turn(tmp_path, env, umask)
    for folder in ("xdg", "xdg/state", "xdg/state/acp-bridge", "xdg/state/acp-bridge/sessions"):
        assert mode(tmp_path / folder) == 0o700, folder
    (log,) = (tmp_path / "xdg/state/acp-bridge/sessions").glob("*.jsonl")
    assert mode(log) == 0o600

    await run_one_turn(tmp_path, env, umask, "--state-dir", str(tmp_path / "explicit" / "state"))
    for folder in ("explicit", "explicit/state", "explicit/state/sessions"):
        assert mode(tmp_path / folder) == 0o700, folder
    (log,) = (tmp_path / "explicit/state/sessions").glob("*.jsonl")
    assert mode(log) == 0o600


async def test_an_existing_state_folder_is_never_loosened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True)
    os.chmod(state, 0o711)
    os.chmod(state / "sessions", 0o750)
    await run_one_turn(tmp_path, base_env(tmp_path), 0o000, "--state-dir", str(state))
    assert mode(state) == 0o711
    assert mode(state / "sessions") == 0o750
    (log,) = (state / "sessions").glob("*.jsonl")
    assert mode(log) == 0o600
