"""How long ``session/load`` takes for logs of 1k, 10k and 100k records.

    python -m bench.load_bench [--sizes 1000,10000,100000] [--runs 5]
    python -m bench.load_bench --idle 1000 [--idle-records 1000]

For each size it writes a synthetic session log (turns of a user message, a
streamed reply of twenty deltas with reasoning and text, every fifth turn
stopped mid-stream, every seventh a refused tool call), spawns
``acp-bridge`` on it, waits until it has started and is idle (no CPU time
for 0.6 s: what it loads in the background after its first session is
start-up), and times ``session/load`` from the request to its response,
replay included (every update read by the client).  Prints the
median per size, the time per record, the updates replayed, and the agent's
CPU time over the same span (median; user + system, from /proc).  Not part of
CI: timings on a shared machine are noisy.

With ``--idle N`` it measures memory instead: one process loads N such logs
(after 10 warm-up loads) and leaves them idle; the RSS growth per session.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson

from acp_bridge.client import bridge_command

CWD = "/home/user/project"
DELTAS = 20


def synthetic_log(session_id: str, records_wanted: int, cwd: str = CWD) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    at = 1_700_000_000.0

    def add(type: str, turn: int, step: int, **fields: Any) -> None:
        nonlocal at
        at += 0.001
        records.append(
            {"v": 1, "seq": len(records), "at": at, "type": type, "turn": turn, "step": step}
            | fields
        )

    add("session/start", 0, 0, session_id=session_id, cwd=cwd, provider="fake", title=None)
    turn = 0
    while len(records) < records_wanted:
        turn += 1
        text = f"Question number {turn}: what about it?"
        add("turn/start", turn, 0)
        block = {"type": "text", "text": text}
        add("user/message", turn, 0, content=[block], prompt=[block])
        add("step/start", turn, 1)
        attempt, message = f"att_{turn:016x}", f"msg_{turn:016x}"
        add("stream/start", turn, 1, attempt=attempt, provider="fake", message_id=message)
        stopped = turn % 5 == 0
        reasoning, answer, stream = "", "", []
        for i in range(DELTAS):
            kind, index = ("reasoning", 0) if i < 4 else ("text", 1)
            piece = f"piece {i} of reply {turn}. "
            add("stream/delta", turn, 1, attempt=attempt, parts=[[index, kind, piece]])
            stream.append([i * 5.0, index, kind, piece])
            if kind == "reasoning":
                reasoning += piece
            else:
                answer += piece
        content = [{"type": "reasoning", "text": reasoning}, {"type": "text", "text": answer}]
        fields: dict[str, Any] = {"attempt": attempt, "message_id": message, "content": content}
        if stopped:
            add(
                "assistant/message",
                turn,
                1,
                **fields,
                interrupted=True,
                finish=None,
                usage=None,
                stream=stream,
            )
            add("stream/end", turn, 1, attempt=attempt, outcome="committed")
            add("step/end", turn, 1, reason="cancelled")
            add("turn/end", turn, 0, reason="cancelled", forced=False)
        else:
            add(
                "assistant/message",
                turn,
                1,
                **fields,
                interrupted=False,
                finish="end_turn",
                usage=None,
            )
            add("stream/end", turn, 1, attempt=attempt, outcome="committed")
            add("step/end", turn, 1, reason="end_turn")
            add("turn/end", turn, 0, reason="end_turn", forced=False)
    return records


UPDATE_PREFIX = b'{"jsonrpc":"2.0","method":"session/update"'


class Client:
    """A raw client of one bridge process: it parses only the responses, so
    the figures are the agent's (reading the log, replaying it, writing every
    update), not a client's JSON parsing."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""
        self.updates = 0

    async def response(self) -> dict[str, Any]:
        while True:
            *lines, self.buffer = self.buffer.split(b"\n")
            for i, line in enumerate(lines):
                if line.startswith(UPDATE_PREFIX):
                    self.updates += 1
                    continue
                self.buffer = b"\n".join([*lines[i + 1 :], self.buffer])
                message: dict[str, Any] = orjson.loads(line)
                return message
            self.buffer += await self.stdout.receive(1 << 20)

    async def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        await self.stdin.send(orjson.dumps(frame) + b"\n")
        return await self.response()

    async def started(self, cwd: str) -> None:
        """``initialize``, then a ``session/new``: it is answered once the agent
        has finished starting (its provider and tools load in a worker thread
        after initialize), so what follows is not the start-up.  Its cwd must
        exist, or the answer is an error that does not wait for the start-up."""
        await self.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await self.request(3, "session/new", {"cwd": cwd, "mcpServers": []})
        assert "result" in new, new
        self.updates = 0  # what that session announced is not part of the load

    async def load(self, rid: int, session_id: str, cwd: str) -> None:
        params = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        answer = await self.request(rid, "session/load", params)
        assert "result" in answer, answer


def spawn(state: Path) -> Any:
    command = bridge_command("--provider", "fake", "--state-dir", str(state))
    return anyio.open_process(command, stderr=subprocess.DEVNULL)


async def time_load(state: Path, session_id: str, cwd: str) -> tuple[float, int, float]:
    """Spawn the bridge, load the session, and time the request to its response;
    also the bridge's CPU time (user + system) over the same span, which a busy
    machine inflates less than the wall time."""
    from bench.procfs import tree_cpu_s

    async with await spawn(state) as process:
        client = Client(process)
        await client.started(cwd)
        # Whatever the agent still does after the session is answered is its
        # start-up, not the load: timed while it ran, the load would share the
        # CPU and the interpreter lock with it.
        await _until_idle(process.pid, tree_cpu_s)
        cpu = tree_cpu_s(process.pid)
        start = time.perf_counter()
        await client.load(2, session_id, cwd)
        elapsed = time.perf_counter() - start
        cpu = tree_cpu_s(process.pid) - cpu
        await client.stdin.aclose()
        await process.wait()
    return elapsed, client.updates, cpu


async def _until_idle(pid: int, cpu_s: Callable[[int], float], within: float = 30.0) -> None:
    """Until the process used no CPU for three reads in a row, 0.2 s apart."""
    quiet, last = 0, cpu_s(pid)
    with anyio.move_on_after(within):
        while quiet < 3:
            await anyio.sleep(0.2)
            now = cpu_s(pid)
            quiet = quiet + 1 if now - last < 0.005 else 0
            last = now


async def idle_memory(count: int, records_each: int, warm: int = 10) -> dict[str, Any]:
    """RSS growth of one process per session loaded and left idle.

    ``count`` + ``warm`` logs of ``records_each`` records each; the bridge
    loads ``warm`` of them and is left until its CPU time stops moving (what it
    loads in the background once a session is answered is not a session's
    cost), then its VmRSS is the baseline; then it loads the other ``count``;
    VmRSS again once the last answer is in.
    """
    from bench.procfs import tree_cpu_s, tree_rss_kib

    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        (state / "sessions").mkdir()
        project = state / "project"
        project.mkdir()
        ids = [f"sess_idle_{i:05d}" for i in range(count + warm)]
        size = 0
        for session_id in ids:
            records = synthetic_log(session_id, records_each, str(project))
            path = state / "sessions" / f"{session_id}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
            size = len(records)
        async with await spawn(state) as process:
            client = Client(process)
            await client.started(str(project))
            for rid, session_id in enumerate(ids[:warm], start=10):
                await client.load(rid, session_id, str(project))
            await _until_idle(process.pid, tree_cpu_s)
            base = tree_rss_kib(process.pid)
            for rid, session_id in enumerate(ids[warm:], start=10 + warm):
                await client.load(rid, session_id, str(project))
            after = tree_rss_kib(process.pid)
            await client.stdin.aclose()
            await process.wait()
    return {
        "sessions": count,
        "records_each": size,
        "base_mib": base / 1024,
        "growth_mib": (after - base) / 1024,
        "kib_per_session": (after - base) / count,
    }


async def main_async(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        (state / "sessions").mkdir()
        project = state / "project"
        project.mkdir()
        for size in sizes:
            session_id = f"sess_bench_{size}"
            records = synthetic_log(session_id, size, str(project))
            path = state / "sessions" / f"{session_id}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
            times = []
            cpus = []
            updates = 0
            for _ in range(runs):
                elapsed, updates, cpu = await time_load(state, session_id, str(project))
                times.append(elapsed)
                cpus.append(cpu)
            median = statistics.median(times)
            rows.append(
                {
                    "records": len(records),
                    "bytes": path.stat().st_size,
                    "updates": updates,
                    "median_s": median,
                    "us_per_record": median / len(records) * 1e6,
                    "cpu_median_s": statistics.median(cpus),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--idle",
        type=int,
        default=0,
        metavar="N",
        help="instead: RSS of N sessions loaded in one process and left idle",
    )
    parser.add_argument("--idle-records", type=int, default=1000, metavar="R")
    args = parser.parse_args()
    if args.idle:
        result = anyio.run(idle_memory, args.idle, args.idle_records)
        if args.json:
            print(json.dumps(result, indent=2))
            return
        print(
            f"{result['sessions']:,} sessions of {result['records_each']:,} records loaded and "
            f"left idle: {result['growth_mib']:.2f} MiB, {result['kib_per_session']:.1f} KiB "
            f"per session (baseline {result['base_mib']:.1f} MiB)"
        )
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = anyio.run(main_async, sizes, args.runs)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"session/load, request to response, median of {args.runs} (replay included)")
    print(
        f"{'records':>9} {'log size':>10} {'updates':>9} {'load':>10} {'per record':>11} "
        f"{'agent CPU':>10}"
    )
    for row in rows:
        print(
            f"{row['records']:>9,} {row['bytes'] / 1e6:>8.1f}MB {row['updates']:>9,} "
            f"{row['median_s'] * 1000:>8.1f}ms {row['us_per_record']:>9.2f}µs "
            f"{row['cpu_median_s'] * 1000:>8.1f}ms"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
