"""Provider benchmark: ``python -m bench.provider_bench [--tokens N] [--runs R]``.

Against an OpenAI-compatible server on loopback (a separate process that
streams ``N`` one-token chunks as fast as the socket takes them), it measures:

* CPU per streamed token of ``acp-bridge --provider openai`` and of a reference
  agent built on the official ACP Python SDK and the official ``openai``
  package (`bench.ref_openai_agent`), in the same run, against the same
  server: the agent process's user+system CPU during one prompt, divided by
  the chunks the editor received;
* time from sending ``session/prompt`` to the first ``agent_message_chunk``,
  over a server that answers at once (a 3-token reply), median of ``R``;
* start-up: spawn to the ``initialize`` answer and to the ``session/new``
  answer, ``--provider openai`` against ``--provider fake``, median of ``R``.

Prints a table; nothing is written to disk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.procfs import tree_cpu_s

ROOT = Path(__file__).resolve().parent.parent


# -- the loopback server (run in its own process) ----------------------------------------


def _chunk(text: str) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "bench",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _tokens(path: str) -> int:
    with open(path) as f:
        return int(f.read())


async def _serve(tokens_file: str) -> None:
    token = _chunk("tok ")
    tail = (
        b"data: "
        + json.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "bench",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        ).encode()
        + b"\n\ndata: [DONE]\n\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                n = _tokens(tokens_file)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                batch = token * 64
                full, rest = divmod(n, 64)
                for _ in range(full):
                    writer.write(b"%x\r\n%s\r\n" % (len(batch), batch))
                    await writer.drain()
                if rest:
                    part = token * rest
                    writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# -- driving an agent over pipes ---------------------------------------------------------


class Agent:
    def __init__(self, argv: list[str]) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
        )
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.buf = b""
        self.next_id = 0

    def cpu(self) -> float:
        return tree_cpu_s(self.proc.pid)

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        return self.next_id

    def lines(self) -> Any:
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                yield line
            select.select([self.fd], [], [], 60)
            data = os.read(self.fd, 1 << 20)
            if not data:
                raise RuntimeError("agent exited")
            self.buf += data

    def wait(self, rid: int) -> tuple[dict[str, Any], int, float | None]:
        """The response to ``rid``, the chunks before it and the time of the first chunk."""
        chunks, first = 0, None
        for line in self.lines():
            if b'"agent_message_chunk"' in line:
                chunks += 1
                if first is None:
                    first = time.perf_counter()
                continue
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                return msg, chunks, first
        raise AssertionError

    def start(self) -> tuple[float, float, str]:
        rid = self.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        self.wait(rid)
        t_init = time.perf_counter() - self.t0
        rid = self.send("session/new", {"cwd": str(ROOT), "mcpServers": []})
        resp, _, _ = self.wait(rid)
        return t_init, time.perf_counter() - self.t0, resp["result"]["sessionId"]

    def prompt(self, sid: str) -> tuple[int, float, float]:
        """(chunks, CPU seconds, seconds to first chunk) of one prompt."""
        cpu0 = self.cpu()
        t0 = time.perf_counter()
        rid = self.send(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        )
        resp, chunks, first = self.wait(rid)
        assert "result" in resp, resp
        return chunks, self.cpu() - cpu0, (first or t0) - t0

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bridge(port: int, state: str, provider: str = "openai") -> list[str]:
    argv = [sys.executable, "-m", "acp_bridge", "--state-dir", state, "--provider", provider]
    if provider == "openai":
        argv += ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "bench"]
    return argv


def reference(port: int) -> list[str]:
    return [sys.executable, "-m", "bench.ref_openai_agent", f"http://127.0.0.1:{port}/v1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--serve", metavar="TOKENS_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    tmp = tempfile.mkdtemp(prefix="provider-bench-")
    tokens_file = os.path.join(tmp, "tokens")
    Path(tokens_file).write_text(str(args.tokens))
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.provider_bench", "--serve", tokens_file],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    try:
        rows = []
        for name, argv in (
            ("acp-bridge --provider openai", bridge(port, tmp)),
            ("reference (ACP SDK + openai)", reference(port)),
        ):
            Path(tokens_file).write_text(str(args.tokens))
            agent = Agent(argv)
            _, _, sid = agent.start()
            agent.prompt(sid)  # warm-up: connection, caches
            chunks, cpu, _ = agent.prompt(sid)
            Path(tokens_file).write_text("3")
            firsts = [agent.prompt(sid)[2] for _ in range(args.runs)]
            agent.close()
            rows.append(
                (
                    name,
                    chunks,
                    cpu / chunks * 1e6,
                    chunks / cpu if cpu else 0.0,
                    statistics.median(firsts) * 1e3,
                )
            )
        print(f"streamed tokens per prompt: {args.tokens}")
        print(
            f"{'agent':32} {'chunks':>7} {'CPU us/token':>13} {'tokens/CPU-s':>13} "
            f"{'first chunk ms':>15}"
        )
        for name, chunks, us, rate, first in rows:
            print(f"{name:32} {chunks:7d} {us:13.1f} {rate:13.0f} {first:15.2f}")
        print(f"CPU per token, bridge / reference: {rows[0][2] / rows[1][2]:.3f}")
        starts: dict[str, list[tuple[float, float]]] = {"fake": [], "openai": []}
        for _ in range(args.runs):
            for provider in ("fake", "openai"):
                agent = Agent(bridge(port, tmp, provider))
                t_init, t_new, _ = agent.start()
                agent.close()
                starts[provider].append((t_init, t_new))
        print("start-up, median ms:     initialize   session/new")
        for provider, values in starts.items():
            init = statistics.median(v[0] for v in values) * 1e3
            new = statistics.median(v[1] for v in values) * 1e3
            print(f"  --provider {provider:8} {init:15.1f} {new:13.1f}")
        fake = statistics.median(v[1] for v in starts["fake"])
        real = statistics.median(v[1] for v in starts["openai"])
        print(f"session/new start-up, openai / fake: {real / fake:.3f}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
