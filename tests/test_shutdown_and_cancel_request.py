"""Shutdown and per-request cancellation, through the real subprocess.

- ``$/cancel_request`` names one prompt: only that prompt is cancelled.
- A prompt cancelled before it started makes no model request.
- Once the editor is gone, queued prompts start no turn.
- An editor that stopped reading stdout cannot keep the bridge from exiting,
  and the log still ends consistently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import barrier, running_bridge
from support.harness import (
    run_bridge,
    update_seen,
    wait_for_a_full_pipe,
    wait_until,
    write_script,
)

from acp_bridge.client import AcpClient, bridge_command, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer.files import LogFile

# Cold: these bridges start as an editor starts them (see tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.cold]


def prompt(rid: int, sid: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "session/prompt",
        "params": prompt_params(sid, text),
    }


def response(client: AcpClient, rid: int) -> dict[str, Any] | None:
    return next((m for d, m in client.transcript if d == "recv" and m.get("id") == rid), None)


async def test_cancel_request_names_one_prompt(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        {
            "responses": [
                {"events": [{"text": "A-"}, {"hang": True}]},
                {"events": [{"text": "second"}]},
            ]
        },
    )
    state = tmp_path / "state"
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.send(prompt(10, sid, "A"))
        await wait_until(update_seen(client, "agent_message_chunk"))
        await client.send(prompt(11, sid, "B"))  # queued behind A
        await client.notify("$/cancel_request", {"requestId": 11})
        await barrier(client)  # a negative check: a wrong stop of 10 would show by now
        assert response(client, 10) is None, "cancelling request 11 must not stop request 10"
        await client.notify("$/cancel_request", {"requestId": 10})
        await wait_until(lambda: None not in (response(client, 10), response(client, 11)))
        box["c"] = await client.prompt(sid, "C")

    run = await run_bridge(script, state, play)
    assert run.returncode == 0
    assert response(run.client, 10)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
    assert response(run.client, 11)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
    # B made no model request: C received the script's second response.
    assert box["c"].text() == "second"
    records = read_records(state / "sessions" / f"{box['sid']}.jsonl")
    check_log(records)
    turn2 = [r["type"] for r in records if r["turn"] == 2]
    assert turn2 == ["turn/start", "user/message", "turn/end"]


async def test_queued_prompts_start_no_turn_once_the_editor_is_gone(tmp_path: Path) -> None:
    script = write_script(tmp_path, {"responses": [{"events": [{"text": "A-"}, {"hang": True}]}]})
    state = tmp_path / "state"
    box: dict[str, Any] = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = box["sid"] = await client.new_session(str(tmp_path))
        await client.send(prompt(10, sid, "A"))
        await wait_until(lambda: bool(client.updates))
        await client.send(prompt(11, sid, "B"))
        await barrier(client)  # B has been read before stdin closes

    run = await run_bridge(script, state, play)  # closes stdin afterwards
    assert run.returncode == 0
    assert response(run.client, 11)["result"] == {"stopReason": "cancelled"}  # type: ignore[index]
    records = read_records(state / "sessions" / f"{box['sid']}.jsonl")
    check_log(records)
    assert [r["reason"] for r in records if r["type"] == "turn/end"] == ["disconnected"]
    assert not any(r["turn"] == 2 for r in records), "a turn started after the editor left"


async def test_an_editor_that_stops_reading_cannot_hold_the_exit(tmp_path: Path) -> None:
    script = tmp_path / "endless.json"
    script.write_text(json.dumps({"responses": [{"events": [{"endless": {"text": "tok "}}]}]}))
    state = tmp_path / "state"
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state)
    )
    async with running_bridge(command, stderr=subprocess.DEVNULL) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.send_request("session/prompt", prompt_params(sid, "go"))
        await client.wait_until(update_seen(client, "agent_message_chunk"))
        client.agent.stdout.pause()  # the stream has started; from now on nobody reads stdout
        await wait_for_a_full_pipe(client)  # and the bridge's writer blocks
        await client.close_stdin()
        code = await client.agent.wait(within=15)
    assert code == 0  # and within the wait's bound: the exit was not held
    records = read_records(state / "sessions" / f"{sid}.jsonl")
    check_log(records)
    assert records[-1]["type"] == "turn/end"
    assert records[-1]["reason"] == "disconnected"


def test_a_log_write_that_cannot_open_keeps_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "later" / "s.jsonl"
    log = LogFile(str(path))
    with pytest.raises(FileNotFoundError):
        log.write(b'{"seq":0}\n')  # the folder does not exist yet
    assert bytes(log.pending) == b'{"seq":0}\n'
    os.mkdir(tmp_path / "later")
    log.write(b'{"seq":1}\n')
    assert path.read_bytes() == b'{"seq":0}\n{"seq":1}\n'
    assert not log.pending
    log.close()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--cancel-deadline", "-1"), ("--idle-timeout", "nan"), ("--max-steps", "0")],
)
def test_bad_numbers_are_refused(option: str, value: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "acp_bridge", option, value],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert option in result.stderr


@pytest.mark.slow
async def test_a_slow_editor_is_not_a_silent_provider(tmp_path: Path) -> None:
    """The idle timeout is about the model: waiting for the editor to read is not silence."""
    text = "word " * 40_000  # 200 KB in 5-byte chunks: far more than the pipe holds
    script = tmp_path / "long.json"
    script.write_text(json.dumps({"responses": [{"events": [{"text": text, "chunk_size": 5}]}]}))
    state = tmp_path / "state"
    command = bridge_command(
        "--provider",
        "fake",
        "--script",
        str(script),
        "--state-dir",
        str(state),
        "--idle-timeout",
        "0.3",
    )
    async with running_bridge(command, stderr=subprocess.DEVNULL) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        client.agent.stdout.pause()
        rid = await client.send_request("session/prompt", prompt_params(sid, "go"))
        await wait_for_a_full_pipe(client)
        await anyio.sleep(1.2)  # the editor reads nothing for four idle limits
        client.agent.stdout.resume()
        answer = await client.wait_response(rid)
        assert answer.get("result") == {"stopReason": "end_turn"}, answer
        assert await client.finish() == 0


def _parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


async def test_a_cold_bridge_is_started_by_the_test_itself(tmp_path: Path) -> None:
    """The cold tier works: a bridge of a test marked ``cold`` is a new interpreter
    started by this process, not a fork of the pre-imported zygote."""
    command = bridge_command("--provider", "fake", "--state-dir", str(tmp_path / "state"))
    async with running_bridge(command) as client:
        assert _parent_of(client.agent.pid) == os.getpid()
        await client.initialize()
        assert await client.finish() == 0
