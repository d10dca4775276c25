"""What one stdio MCP server adds to ``session/new`` (issue 16).

    python -m bench.mcp_startup [--runs N] [--timeout S]

The goal: with one stdio MCP server, ``session/new`` costs at most the
server's own start-up plus a few milliseconds.  Per run, each a fresh process
(or several), in the order A to G:

* A: the bridge without MCP: spawn ``python -m acp_bridge --provider fake``,
  ``initialize``, ``session/new`` with ``mcpServers: []``; spawn -> answer;
* B: the same with one stdio server (``bench/mcp_echo_server.py``, one tool)
  in ``mcpServers`` and ``--mcp-start-timeout 30``;
* C: the server's own start-up, through the ``mcp`` client library in this
  process (already imported): spawn -> ``initialize`` -> ``tools/list`` answered;
* D: ``python -c "import mcp.client.session"``: spawn -> exit, the client
  library's import cost (plus an interpreter's start), which the bridge pays too;
* E: ``python -c pass``: spawn -> exit, the interpreter alone (D - E is the import);
* F: C again, while another process imports the ``mcp`` client (D's import,
  started with the server): the server's start-up when something else needs
  the same CPU, as it did in B while the bridge imported ``mcp`` during it
  (F - C is what that costs on this machine);
* G: B, then one prompt whose (scripted) model calls the server's tool:
  spawn -> the prompt's answer.  The bridge loads the ``mcp`` client after
  the server has started, so G - B holds what is left of that import when
  the call is made at once, besides the turn itself.

A to E are measured as before (F and G were added later), so their figures
compare with older runs.  One untimed round first warms the bytecode and page
caches.  Printed: median and p90 of each, then B - A - C (the bridge's own
extra cost with one server) and B / (A + C), both from the medians and as the
median of the per-run values, then F - C and G - B.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.results import quantile

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER = str(Path(__file__).resolve().parent / "mcp_echo_server.py")
NAMES = ("A", "B", "C", "D", "E", "F", "G")
LABELS = {
    "A": "bridge, no MCP: spawn -> session/new",
    "B": "bridge, one stdio server: spawn -> session/new",
    "C": "server alone: spawn -> tools/list",
    "D": "python -c 'import mcp.client.session'",
    "E": "python -c pass",
    "F": "C, with an mcp import in another process",
    "G": "B, then a prompt calling the tool: -> answer",
}
# G's model: call the server's tool, then answer.
CALL_SCRIPT = {
    "responses": [
        {
            "events": [
                {"tool_call": {"id": "c1", "name": "mcp__s__echo", "arguments": {"text": "x"}}}
            ]
        },
        {"events": [{"text": "done"}]},
    ]
}
IMPORT = "import mcp.client.session"


def now() -> float:
    return time.perf_counter()


class Pipe:
    """Newline-delimited JSON-RPC over a child's stdin/stdout, read with selectors."""

    def __init__(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        assert proc.stdin is not None
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.timeout = timeout
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)

    def send(self, rid: int, method: str, params: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, rid: int) -> dict[str, Any]:
        """The response to ``rid``; notifications (``session/update``) are skipped."""
        deadline = now() + self.timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                message = json.loads(line)
                if message.get("id") == rid and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"request {rid} failed: {message['error']}")
                    result: dict[str, Any] = message.get("result") or {}
                    return result
            left = deadline - now()
            if left <= 0:
                raise TimeoutError(f"no answer to request {rid} within {self.timeout} s")
            if self.selector.select(left):
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise RuntimeError(f"the bridge closed its stdout (status {self.proc.poll()})")
                self.buffer += chunk

    def close(self) -> None:
        self.selector.close()
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def bridge_once(with_server: bool, timeout: float, call: bool = False) -> float:
    """ms from spawn to the ``session/new`` answer (A, or B with one server),
    or, with ``call``, to the answer of a prompt that calls its tool (G)."""
    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as cwd:
        cmd = [sys.executable, "-m", "acp_bridge", "--provider", "fake", "--state-dir", state]
        servers: list[dict[str, Any]] = []
        if with_server:
            cmd += ["--mcp-start-timeout", "30"]
            servers = [{"name": "s", "command": sys.executable, "args": [SERVER], "env": []}]
        if call:
            script = Path(state) / "script.json"
            script.write_text(json.dumps(CALL_SCRIPT))
            cmd += ["--script", str(script)]
        t0 = now()
        proc = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        pipe = Pipe(proc, timeout)
        try:
            pipe.send(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            pipe.answer(1)
            pipe.send(2, "session/new", {"cwd": cwd, "mcpServers": servers})
            result = pipe.answer(2)
            elapsed = (now() - t0) * 1000
            if not result.get("sessionId"):
                raise RuntimeError(f"session/new without sessionId: {str(result)[:300]}")
            if call:
                prompt = [{"type": "text", "text": "call it"}]
                pipe.send(3, "session/prompt", {"sessionId": result["sessionId"], "prompt": prompt})
                answer = pipe.answer(3)
                elapsed = (now() - t0) * 1000
                if answer.get("stopReason") != "end_turn":
                    raise RuntimeError(f"the prompt ended {answer}")
        finally:
            pipe.close()
        return elapsed


def server_once(timeout: float, beside: str | None = None) -> float:
    """C: ms from spawn to the server's ``tools/list`` answer, via the ``mcp`` client;
    F, with ``beside``: while another process runs ``python -c BESIDE``."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    elapsed: list[float] = []
    others: list[subprocess.Popen[bytes]] = []
    if beside is not None:  # started just before the server
        others.append(subprocess.Popen([sys.executable, "-c", beside], cwd=REPO_ROOT))

    async def run() -> None:
        with anyio.fail_after(timeout):
            t0 = now()
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                elapsed.append((now() - t0) * 1000)
                names = [tool.name for tool in listed.tools]
                if names != ["echo"]:
                    raise RuntimeError(f"the server offers {names}, not ['echo']")

    try:
        anyio.run(run)
    finally:
        for other in others:
            other.wait()
    return elapsed[0]


def command_once(code: str) -> float:
    """D, E: ms from spawn to exit of ``python -c CODE``."""
    t0 = now()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT)
    return (now() - t0) * 1000


def measures(timeout: float) -> dict[str, Callable[[], float]]:
    return {
        "A": lambda: bridge_once(False, timeout),
        "B": lambda: bridge_once(True, timeout),
        "C": lambda: server_once(timeout),
        "D": lambda: command_once(IMPORT),
        "E": lambda: command_once("pass"),
        "F": lambda: server_once(timeout, beside=IMPORT),
        "G": lambda: bridge_once(True, timeout, call=True),
    }


def _row(label: str, values: list[float]) -> str:
    median, p90 = quantile(values, 0.5), quantile(values, 0.9)
    return f"  {label:<52} median {median:8.1f}   p90 {p90:8.1f}"


def report(samples: dict[str, list[float]]) -> str:
    runs = len(samples["A"])
    lines = [f"MCP start-up cost of session/new, {runs} runs (ms)"]
    lines += [_row(f"{name}  {LABELS[name]}", samples[name]) for name in NAMES]
    a, b, c = samples["A"], samples["B"], samples["C"]
    med = {name: quantile(samples[name], 0.5) for name in NAMES}
    extra = [bi - ai - ci for ai, bi, ci in zip(a, b, c, strict=True)]
    ratio = [bi / (ai + ci) for ai, bi, ci in zip(a, b, c, strict=True)]
    lines += [
        "",
        f"  B - A        (what one server adds to session/new)       {med['B'] - med['A']:8.1f}",
        f"  B - A - C    (the bridge's own extra, from the medians)  "
        f"{med['B'] - med['A'] - med['C']:8.1f}",
        f"  B - A - C    (per run: median, p90)                      "
        f"{quantile(extra, 0.5):8.1f}   p90 {quantile(extra, 0.9):8.1f}",
        f"  B / (A + C)  (from the medians)                          "
        f"{med['B'] / (med['A'] + med['C']):8.2f}",
        f"  B / (A + C)  (per run: median, p90)                      "
        f"{quantile(ratio, 0.5):8.2f}   p90 {quantile(ratio, 0.9):8.2f}",
        f"  D - E        (importing mcp.client.session)              {med['D'] - med['E']:8.1f}",
        f"  F - C        (the server's start-up slowed by an import)  {med['F'] - med['C']:8.1f}",
        f"  G - B        (then a turn with one call of its tool)     {med['G'] - med['B']:8.1f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    opts = parser.parse_args(argv)
    if opts.runs < 1:
        parser.error("--runs must be at least 1")
    import mcp.client.session  # noqa: F401  (C measures the server, not this import)

    todo = measures(opts.timeout)
    for measure in todo.values():  # warm-up, untimed
        measure()
    samples: dict[str, list[float]] = {name: [] for name in NAMES}
    for i in range(opts.runs):
        for name in NAMES:
            samples[name].append(todo[name]())
        row = "  ".join(f"{name} {samples[name][-1]:7.1f}" for name in NAMES)
        print(f"run {i + 1}/{opts.runs}: {row}", file=sys.stderr)
    print(report(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
