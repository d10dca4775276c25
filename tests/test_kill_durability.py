"""A crash loses nothing the editor received (invariant I4).

The real bridge is killed with SIGKILL at hundreds of random moments: while
it streams at full rate (``endless.json``), while a paced answer streams, and
between the back-to-back turns of queued prompts.  After each kill, every
byte the bridge wrote to stdout before it died is read from the pipe (that is
what an editor received), and the session log must hold every character of
every ``agent_message_chunk`` and ``agent_thought_chunk`` in its
``stream/delta`` records, in order.  Every log must read
(`acp_bridge.log.reader`) and its derived history must pass
`acp_bridge.log.check`.

The kills run a few processes at a time, each killed after a short random
delay; the bridges are forked from the test session's zygote
(`support.zygote.fork_agent`: a process that imported the bridge once), each
one running the command's own entry point on its own pipes, so the test does
not pay the interpreter's start-up 200 times.  Each bridge is driven by the
package's client (`acp_bridge.client.attached`), all of them from one event
loop.
The seed is printed on failure (``ACP_BRIDGE_KILL_SEED`` replays it).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest
from support.harness import EXAMPLES
from support.zygote import fork_agent

from acp_bridge.client import CHUNK_KINDS, AcpClient, attached, id_key, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

KILLS = int(os.environ.get("ACP_BRIDGE_KILLS", "200"))
PARALLEL = 3
PROMPT_IDS = 10  # the first prompt's request id

PACED: dict[str, Any] = {
    "responses": [
        {
            "events": [
                {"reasoning": "Thinking it over, slowly. ", "chunk_size": 3},
                {
                    "text": "One sentence after another, paced. " * 6,
                    "chunk_size": 4,
                    "chunk_delay_ms": 1,
                },
            ]
        },
        {"events": [{"text": "A short answer.", "chunk_size": 2}]},
        {"events": [{"text": "Fast " * 200, "chunk_size": 5}]},
    ],
    "when_exhausted": "repeat_all",
}


@dataclass
class Scenario:
    name: str
    script: Path
    prompts: int
    # Random kill delay after the first chunk is received, in seconds.
    max_delay: float


@dataclass
class Delivered:
    # The text of every chunk received, per kind ("text", "reasoning").
    text: dict[str, str]
    # Prompts answered.
    answered: int


def chunk_seen(client: AcpClient) -> bool:
    return any(u.get("sessionUpdate") in CHUNK_KINDS for u in client.updates)


async def kill_once(scenario: Scenario, folder: Path, rng: random.Random) -> tuple[Delivered, Path]:
    """Run the bridge, kill it at a random moment; return what the client received."""
    os.mkdir(folder)
    state = folder / "state"
    args = ["--script", str(scenario.script), "--state-dir", str(state)]
    agent = await fork_agent(args, env=None, stderr=subprocess.DEVNULL, paused=False, cwd=None)
    async with attached(agent) as client:
        await client.initialize()
        sid = await client.new_session(str(folder))
        # Queued in one write: the turns run back to back.
        await client.send(
            *(
                {
                    "jsonrpc": "2.0",
                    "id": PROMPT_IDS + n,
                    "method": "session/prompt",
                    "params": prompt_params(sid, f"Prompt {n}"),
                }
                for n in range(scenario.prompts)
            )
        )
        await client.wait_until(lambda: chunk_seen(client), within=60)
        await anyio.sleep(rng.uniform(0, scenario.max_delay))
        agent.send_signal(signal.SIGKILL)
        # What the bridge wrote before it died is still in the pipe: read to EOF.
        with anyio.fail_after(30):
            await client.eof.wait()

    # A torn last frame was not received (the client keeps it out of `updates`).
    kinds = {"agent_message_chunk": "text", "agent_thought_chunk": "reasoning"}
    parts: dict[str, list[str]] = {"text": [], "reasoning": []}
    for update in client.updates:
        kind = kinds.get(update["sessionUpdate"])
        if kind is not None:
            parts[kind].append(update["content"]["text"])
    answered = sum(
        1
        for n in range(scenario.prompts)
        if any("result" in r for r in client.responses.get(id_key(PROMPT_IDS + n), ()))
    )
    delivered = {kind: "".join(texts) for kind, texts in parts.items()}
    return Delivered(delivered, answered), state / "sessions" / f"{sid}.jsonl"


def logged_text(records: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, list[str]] = {"text": [], "reasoning": []}
    for record in records:
        if record["type"] == "stream/delta":
            for _index, kind, text in record["parts"]:
                if kind in out:
                    out[kind].append(text)
    return {kind: "".join(texts) for kind, texts in out.items()}


@pytest.mark.slow
async def test_a_kill_at_any_moment_loses_no_delivered_text(tmp_path: Path) -> None:
    seed = int(os.environ.get("ACP_BRIDGE_KILL_SEED", random.randrange(1 << 32)))
    paced = tmp_path / "paced.json"
    paced.write_text(json.dumps(PACED))
    scenarios = [
        Scenario("endless", EXAMPLES / "endless.json", prompts=1, max_delay=0.02),
        Scenario("paced", paced, prompts=4, max_delay=0.15),
    ]
    results: list[tuple[str, str | None, int]] = []

    async def job(i: int, scenario: Scenario) -> tuple[str, str | None, int]:
        rng = random.Random(seed * 1000 + i)
        delivered, path = await kill_once(scenario, tmp_path / f"k{i}", rng)
        records = read_records(path)
        check_log(records)
        logged = logged_text(records)
        received = sum(len(t) for t in delivered.text.values())
        ended = sum(1 for r in records if r["type"] == "turn/end")
        if ended < delivered.answered:
            return (
                scenario.name,
                f"kill {i}: {delivered.answered} prompts answered, "
                f"{ended} turn/end records: answered before logged",
                received,
            )
        for kind, text in delivered.text.items():
            if not logged[kind].startswith(text):
                missing = len(text) - _common_prefix(text, logged[kind])
                return (
                    scenario.name,
                    f"kill {i}: {missing} delivered {kind} characters "
                    "are in no stream/delta record",
                    received,
                )
        return scenario.name, None, received

    jobs = iter(range(KILLS))

    async def worker() -> None:
        for i in jobs:  # shared: each kill is taken by one worker
            results.append(await job(i, scenarios[i % len(scenarios)]))

    async with anyio.create_task_group() as tg:
        for _ in range(PARALLEL):
            tg.start_soon(worker)
    failures = [why for _, why, _ in results if why is not None]
    assert not failures, f"seed {seed}: {len(failures)} of {KILLS} kills lost text: {failures[:5]}"
    # The kills did land mid-stream: most runs had delivered text when they died.
    assert sum(1 for _, _, n in results if n > 0) >= KILLS * 0.9


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
