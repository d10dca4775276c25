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
delay; the bridges are forked from a process that imported the bridge once
(`bridge_zygote.py`), each one running the command's own entry point on its
own pipes, so the test does not pay the interpreter's start-up 200 times.
The seed is printed on failure (``ACP_BRIDGE_KILL_SEED`` replays it).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from harness import EXAMPLES

from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

KILLS = int(os.environ.get("ACP_BRIDGE_KILLS", "200"))
PARALLEL = 3

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


def _frames(*messages: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(m) + b"\n" for m in messages)


def _prompt(rid: int, text: str) -> dict[str, Any]:
    # The session id is not known in advance: prompts are sent after session/new.
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "session/prompt",
        "params": {"sessionId": "", "prompt": [{"type": "text", "text": text}]},
    }


class Zygote:
    """The forking parent of the bridges (see `bridge_zygote.py`)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("bridge_zygote.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.lock = threading.Lock()

    def spawn(self, folder: Path, *args: str) -> tuple[int, BinaryIO, BinaryIO]:
        stdin_fifo, stdout_fifo = folder / "stdin", folder / "stdout"
        os.mkfifo(stdin_fifo)
        os.mkfifo(stdout_fifo)
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write(orjson.dumps([str(stdin_fifo), str(stdout_fifo), *args]) + b"\n")
            self.proc.stdin.flush()
            pid = int(self.proc.stdout.readline())
        # Opened in the child's order (its stdin, then its stdout).
        stdin = open(stdin_fifo, "wb")  # noqa: SIM115
        stdout = open(stdout_fifo, "rb", buffering=0)  # noqa: SIM115
        return pid, stdin, stdout

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()


def kill_once(
    zygote: Zygote, scenario: Scenario, folder: Path, rng: random.Random
) -> tuple[Delivered, Path]:
    """Run the bridge, kill it at a random moment; return what the client received."""
    folder.mkdir()
    state = folder / "state"
    pid, stdin, stdout = zygote.spawn(
        folder, "--script", str(scenario.script), "--state-dir", str(state)
    )
    received = bytearray()
    first_chunk = threading.Event()
    session: list[str] = []
    lock = threading.Lock()

    def read() -> None:
        fd = stdout.fileno()
        while True:
            data = os.read(fd, 1 << 16)
            if not data:
                return
            with lock:
                received.extend(data)
                if not session and b'"sessionId"' in received:
                    for line in bytes(received).split(b"\n")[:-1]:
                        msg = orjson.loads(line)
                        if msg.get("id") == 2 and "result" in msg:
                            session.append(msg["result"]["sessionId"])
                            break
                if b"_chunk" in data:
                    first_chunk.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stdin.write(
        _frames(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(state), "mcpServers": []},
            },
        )
    )
    stdin.flush()
    deadline = time.monotonic() + 60
    while not session and time.monotonic() < deadline:
        time.sleep(0.002)
    assert session, "no session/new answer"
    sid = session[0]
    prompts = []
    for n in range(scenario.prompts):
        p = _prompt(10 + n, f"Prompt {n}")
        p["params"]["sessionId"] = sid
        prompts.append(p)
    stdin.write(_frames(*prompts))  # queued: the turns run back to back
    stdin.flush()
    assert first_chunk.wait(60), "no chunk arrived"
    time.sleep(rng.uniform(0, scenario.max_delay))
    os.kill(pid, signal.SIGKILL)
    reader.join(30)  # what the bridge wrote before it died is still in the pipe
    assert not reader.is_alive()
    stdin.close()
    stdout.close()

    delivered = {"text": "", "reasoning": ""}
    kinds = {"agent_message_chunk": "text", "agent_thought_chunk": "reasoning"}
    parts: dict[str, list[str]] = {"text": [], "reasoning": []}
    answered = 0
    for line in bytes(received).split(b"\n")[:-1]:  # a torn last frame was not received
        msg = orjson.loads(line)
        if isinstance(msg.get("id"), int) and msg["id"] >= 10 and "result" in msg:
            answered += 1
        if msg.get("method") != "session/update":
            continue
        update = msg["params"]["update"]
        kind = kinds.get(update["sessionUpdate"])
        if kind is not None:
            parts[kind].append(update["content"]["text"])
    for kind, texts in parts.items():
        delivered[kind] = "".join(texts)
    return Delivered(delivered, answered), state / "sessions" / f"{sid}.jsonl"


def logged_text(records: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, list[str]] = {"text": [], "reasoning": []}
    for record in records:
        if record["type"] == "stream/delta":
            for _index, kind, text in record["parts"]:
                if kind in out:
                    out[kind].append(text)
    return {kind: "".join(texts) for kind, texts in out.items()}


def test_a_kill_at_any_moment_loses_no_delivered_text(tmp_path: Path) -> None:
    seed = int(os.environ.get("ACP_BRIDGE_KILL_SEED", random.randrange(1 << 32)))
    paced = tmp_path / "paced.json"
    paced.write_text(json.dumps(PACED))
    scenarios = [
        Scenario("endless", EXAMPLES / "endless.json", prompts=1, max_delay=0.02),
        Scenario("paced", paced, prompts=4, max_delay=0.15),
    ]
    jobs = [(i, scenarios[i % len(scenarios)]) for i in range(KILLS)]

    def job(i: int, scenario: Scenario) -> tuple[str, str | None, int]:
        rng = random.Random(seed * 1000 + i)
        delivered, path = kill_once(zygote, scenario, tmp_path / f"k{i}", rng)
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

    zygote = Zygote()
    try:
        with ThreadPoolExecutor(PARALLEL) as pool:
            results = list(pool.map(lambda a: job(*a), jobs))
    finally:
        zygote.close()
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
