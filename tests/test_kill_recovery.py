"""SIGKILL at random moments, then load in a new process (crash recovery).

Twenty scripted sessions run side by side; each is killed ten times (200 kills
in all) at a random moment: before a prompt, mid-stream (text, reasoning, a
tool call), between turns.  After each kill a new process loads the session;
the load must succeed, its replay must hold every character the client had
received from the killed process (per message), and the log must pass
`acp_bridge.log.check.check_log` (a turn cut by the kill is closed as
``crashed``, invariant I3).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import running_bridge
from support.harness import EVENT_LOG_VALIDATOR, cwd_for_tests

from acp_bridge.client import CHUNK_KINDS, AgentExited, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import session_path
from acp_bridge.log.upcast import load_log

pytestmark = pytest.mark.anyio

SESSIONS = 20
KILLS_PER_SESSION = 10
CWD = cwd_for_tests()

Json = dict[str, Any]


def random_script(rng: random.Random, round_no: int) -> Json:
    """Two to four answers, some with reasoning or a tool call; the last one,
    plain text, repeats.  Tool call ids are unique in the session (the script
    is written anew for each process, and each call is played once)."""
    responses: list[Json] = []
    count = rng.randint(2, 4)
    for number in range(count):
        events: list[Json] = []
        if rng.random() < 0.4:
            events.append({"reasoning": "thinking " * rng.randint(5, 30), "chunk_size": 7})
        events.append(
            {
                "text": "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(50, 400))),
                "chunk_size": rng.randint(2, 9),
                "chunk_delay_ms": rng.randint(0, 3),
            }
        )
        if number < count - 1 and rng.random() < 0.4:
            events.append(
                {
                    "tool_call": {
                        "id": f"call_{round_no}_{number}",
                        "name": "read_file",
                        "arguments": {"path": "x"},
                        "chunks": 3,
                    }
                }
            )
        responses.append({"events": events})
    return {"responses": responses, "when_exhausted": "repeat_last", "chunk_delay_ms": 1}


def delivered(updates: list[Json]) -> dict[tuple[str, str], str]:
    """Text per (messageId, update kind)."""
    out: dict[tuple[str, str], str] = {}
    for update in updates:
        kind = update.get("sessionUpdate")
        if kind in CHUNK_KINDS and "messageId" in update:
            key = (update["messageId"], kind)
            out[key] = out.get(key, "") + update["content"]["text"]
    return out


async def one_session(index: int, tmp: Path, failures: list[str]) -> None:
    rng = random.Random(index)
    script = tmp / f"script-{index}.json"
    state = tmp / "state"
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state)
    )
    session_id: str | None = None
    received: dict[tuple[str, str], str] = {}
    for round_no in range(KILLS_PER_SESSION + 1):
        script.write_text(json.dumps(random_script(rng, round_no)))
        async with running_bridge(command, stderr=subprocess.DEVNULL) as client:
            with anyio.fail_after(60):
                await client.initialize()
                if session_id is None:
                    session_id = await client.new_session(CWD)
                else:
                    loaded = await client.request(
                        "session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
                    )
                    where = f"session {index} round {round_no}"
                    assert "result" in loaded, f"{where}: {loaded}"
                    replay = delivered(client.updates)
                    for key, text in received.items():
                        if not replay.get(key, "").startswith(text):
                            failures.append(
                                f"{where}: {key} lost text the client had received: "
                                f"{len(text)} received, replayed {replay.get(key, '')!r}, "
                                f"received {text!r}"
                            )
            if round_no == KILLS_PER_SESSION:
                await client.finish()
                break
            live_from = len(client.updates)
            # Before a prompt, mid-stream, or between turns: wherever the clock says.
            with anyio.move_on_after(rng.uniform(0.0, 0.25)):
                turn = 0
                while True:
                    turn += 1
                    try:
                        await client.prompt(session_id, f"round {round_no} prompt {turn}", settle=0)
                    except AgentExited:
                        break
            client.agent.send_signal(signal.SIGKILL)
            await client.agent.wait()
        for key, text in delivered(client.updates[live_from:]).items():
            received[key] = received.get(key, "") + text
    assert session_id is not None
    records = load_log(session_path(state, session_id)).records
    check_log(records)
    for record in records:
        assert EVENT_LOG_VALIDATOR.is_valid(record), record


@pytest.mark.slow
async def test_sigkill_at_200_moments_loses_nothing_delivered(tmp_path: Path) -> None:
    failures: list[str] = []
    limiter = anyio.CapacityLimiter(8)

    async def guarded(index: int) -> None:
        async with limiter:
            await one_session(index, tmp_path, failures)

    async with anyio.create_task_group() as tg:
        for index in range(SESSIONS):
            tg.start_soon(guarded, index)
    assert failures == []
