"""Microbenchmark of the stream hot path: the assembler and the scripted provider.

Prints events per second for:
  1. feeding 1,000,000 TextDeltas to a StreamAssembler (plus the final join);
  2. iterating the endless scripted provider for 1 s;
  3. the same, feeding every event to an assembler.

Run: python -m bench.assembler_bench
"""

from __future__ import annotations

import time

import anyio

from acp_bridge.loop.assembler import StreamAssembler
from acp_bridge.providers.base import ModelRequest, TextDelta
from acp_bridge.providers.script_format import parse_script
from acp_bridge.providers.scripted import ScriptedProvider

N_DELTAS = 1_000_000
SECONDS = 1.0


def bench_assembler() -> None:
    words = ["tok ", "en ", "stream ", "ing "]
    events = [TextDelta(0, words[i & 3]) for i in range(N_DELTAS)]
    assembler = StreamAssembler()
    feed = assembler.feed
    start = time.perf_counter()
    for event in events:
        feed(event)
    fed = time.perf_counter() - start
    assembler.blocks()
    total = time.perf_counter() - start
    print(f"assembler.feed: {N_DELTAS / fed:>12,.0f} deltas/s  ({fed * 1000:.0f} ms)")
    print(f"  incl. blocks(): {N_DELTAS / total:>10,.0f} deltas/s  ({total * 1000:.0f} ms)")


async def bench_endless(with_assembler: bool) -> None:
    script = parse_script({"responses": [{"events": [{"endless": {"text": "tok "}}]}]})
    provider = ScriptedProvider(script)
    assembler = StreamAssembler()
    feed = assembler.feed
    count = 0
    start = anyio.current_time()
    with anyio.move_on_after(SECONDS) as scope:
        async with provider.stream(ModelRequest(messages=[])) as events:
            if with_assembler:
                async for event in events:
                    feed(event)
                    count += 1
            else:
                async for _ in events:
                    count += 1
    elapsed = anyio.current_time() - start
    late_us = (anyio.current_time() - scope.deadline) * 1e6
    label = "endless provider + assembler" if with_assembler else "endless provider"
    print(f"{label}: {count / elapsed:>12,.0f} events/s  (cancel seen {late_us:.0f} us late)")


def main() -> None:
    bench_assembler()
    anyio.run(bench_endless, False)
    anyio.run(bench_endless, True)


if __name__ == "__main__":
    main()
