"""The tests' own helpers: the two ways `start_bridge` runs a bridge, and `barrier`."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import zygote
from support.bridge import MODES, BridgeStarter, Mode, barrier, running_bridge, start_bridge
from support.harness import EXAMPLES, cwd_for_tests, normalize, prompt_and_look

from acp_bridge.client import AcpClient, bridge_command, running
from acp_bridge.testing.launcher import AgentLauncher

pytestmark = pytest.mark.anyio

HELLO = EXAMPLES / "hello.json"


async def a_session(client: AcpClient) -> list[Any]:
    await client.initialize()
    session_id = await client.new_session(cwd_for_tests())
    result = await client.prompt(session_id, "Hi", settle=0)
    assert result.stop_reason == "end_turn"
    return [[direction, message] for direction, message in client.transcript]


@pytest.mark.parametrize("bridge_mode", MODES)
async def test_the_fixture_starts_a_bridge_in_either_mode(
    bridge: BridgeStarter, bridge_mode: Mode, tmp_path: Path
) -> None:
    async with bridge(script=HELLO) as client:
        await a_session(client)
        assert (bridge_mode == "subprocess") == hasattr(client.process, "pid")
    assert len(list((tmp_path / "state" / "sessions").glob("*.jsonl"))) == 1


async def test_both_modes_put_the_same_session_on_the_wire(tmp_path: Path) -> None:
    transcripts = []
    for mode in MODES:
        async with start_bridge(tmp_path / mode, script=HELLO, mode=mode) as client:
            transcripts.append(normalize(await a_session(client)))
    # From session/new on (initialize's auth methods name the executable).
    assert transcripts[0][2:] == transcripts[1][2:]
    assert len(transcripts[0]) > 6


async def test_the_in_process_bridge_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="extra options"):
        async with start_bridge(tmp_path, "--log-level", "debug", script=HELLO, mode="inprocess"):
            pass


# An agent that answers a prompt and then, a while later, one more update (a
# leak a check must catch) before it reads its next line; it answers every
# other request with "method not found".
LATE_AGENT = r"""
import json, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "session/prompt":
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
        time.sleep(0.3)  # the client has taken the answer; the next line comes later
        out = [{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
                "update": {"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": "late"}}}}]
    else:
        out = [{"jsonrpc": "2.0", "id": msg["id"],
                "error": {"code": -32601, "message": "Method not found"}}]
    sys.stdout.write("".join(json.dumps(m) + "\n" for m in out))
    sys.stdout.flush()
"""


async def test_a_barrier_sees_an_update_after_the_response_and_leaves_no_trace() -> None:
    async with running([sys.executable, "-c", LATE_AGENT]) as client:
        result = await prompt_and_look(client, "s", "Hi")
        assert result.stop_reason == "end_turn"
        assert [u["content"]["text"] for u in result.late] == ["late"]
        methods = [m.get("method") for _, m in client.transcript]
        assert methods == ["session/prompt", None, "session/update"]
        assert len(client.times) == len(client.transcript)
        await barrier(client)
        assert len(client.transcript) == 3
        assert len(client.messages) == 2
        assert list(client.responses) == [b"1"]


# -- the zygote: subprocess bridges forked from one pre-imported process -------


async def test_a_subprocess_bridge_is_forked_from_the_zygote_and_ends_like_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(zygote.ENV_SPAWN, raising=False)
    async with start_bridge(tmp_path / "a", script=HELLO, stderr=tmp_path / "err") as client:
        process = client.agent.process
        assert isinstance(process, zygote.ForkedProcess)
        # Its own process (not this one, not the zygote), a child of the zygote.
        assert process.pid != os.getpid()
        stat = await anyio.Path(f"/proc/{process.pid}/stat").read_text()
        assert stat.split()[3] != str(os.getpid())
        await a_session(client)
        assert await client.finish() == 0
    async with start_bridge(tmp_path / "b", script=HELLO) as client:
        await a_session(client)
        client.agent.send_signal(signal.SIGKILL)
        assert await client.agent.wait() == -signal.SIGKILL
    # The environment is the one given: the state directory comes from it here.
    env = {**os.environ, "ACP_BRIDGE_STATE_DIR": str(tmp_path / "c")}
    command = bridge_command("--provider", "fake", "--script", str(HELLO))
    async with running_bridge(command, env=env) as client:
        assert isinstance(client.agent.process, zygote.ForkedProcess)
        await a_session(client)
    # Each wrote its own session log.
    for name in ("a", "b", "c"):
        assert len(list((tmp_path / name / "sessions").glob("*.jsonl"))) == 1


async def test_what_the_interpreter_reads_at_start_gets_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(zygote.ENV_SPAWN, raising=False)
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    assert not zygote.fork_allowed(env)
    async with start_bridge(tmp_path, script=HELLO, env=env) as client:
        assert not isinstance(client.agent.process, zygote.ForkedProcess)
        await a_session(client)
    monkeypatch.setenv(zygote.ENV_SPAWN, "fresh")
    async with start_bridge(tmp_path, script=HELLO) as client:
        assert not isinstance(client.agent.process, zygote.ForkedProcess)


async def test_the_kits_agents_start_through_its_runner(tmp_path: Path) -> None:
    """`acp_agent_runner` (here: `running_bridge`, see conftest) starts the kit's agents."""
    started: list[list[str]] = []

    def recording(command: Sequence[str], **options: Any) -> AbstractAsyncContextManager[AcpClient]:
        started.append(list(command))
        return running_bridge(command, **options)

    launcher = AgentLauncher(tmp_path, runner=recording)
    async with launcher.bridge(script=HELLO) as agent:
        assert isinstance(agent.client.agent.process, zygote.ForkedProcess)
        await agent.client.initialize()
    assert len(started) == 1
    assert started[0][started[0].index("--script") + 1] == str(HELLO)
