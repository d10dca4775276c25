"""Benchmark acp-bridge against an SDK reference agent and a raw orjson agent (the limit).

Run from the repository root::

    python -m bench.run            # full run (several minutes on 2 cores)
    python -m bench.run --quick    # smoke run
    python -m bench.run --agents ref-sdk,ref-raw --out /some/dir

All agents are measured in the same run, interleaved, by a small raw client (pipes +
``select``, substring counting on the hot path, sampled full parsing).  The tests live in
their own modules (startup, throughput, cancel, turns, memory); see bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agents import (
    ALL_AGENTS,
    BRIDGE,
    DEFAULT_BRIDGE_CMD,
    REFERENCE_CMDS,
    REPO_ROOT,
    AgentSpec,
    log,
    now,
)
from bench.cancel import cancel_latency, stop_latency
from bench.chart import write_png
from bench.config import Config
from bench.memory import memory
from bench.report import render_markdown, to_json
from bench.runner import Bench
from bench.startup import startup
from bench.throughput import throughput
from bench.turns import turn_overhead
from bench.wire import Message

TESTS: dict[str, Callable[[Bench], None]] = {
    "startup": startup,
    "throughput": throughput,
    "cancel_latency": cancel_latency,
    "stop_latency": stop_latency,
    "turn_overhead": turn_overhead,
    "memory": memory,
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.run",
        description="Benchmark acp-bridge against an SDK reference agent and a raw agent.",
    )
    p.add_argument(
        "--quick", action="store_true", help="small N: a smoke run (~15 s instead of ~2 min)"
    )
    p.add_argument(
        "--agents",
        default=",".join(ALL_AGENTS),
        help=f"comma-separated subset of {', '.join(ALL_AGENTS)}",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "bench" / "out",
        help="output directory (default: bench/out)",
    )
    p.add_argument(
        "--bridge-cmd",
        default=DEFAULT_BRIDGE_CMD,
        help="acp-bridge command line; {python} and {state_dir} are substituted",
    )
    p.add_argument(
        "--tests",
        default=",".join(TESTS),
        help=f"comma-separated subset of {','.join(TESTS)}",
    )
    p.add_argument("--startup-spawns", type=int, help="timed spawns per agent (default 15)")
    p.add_argument("--throughput-reps", type=int, help="throughput runs per agent (default 5)")
    p.add_argument("--window", type=float, help="throughput window in seconds (default 2)")
    p.add_argument(
        "--coalesce-ms",
        type=float,
        help="longest throughput-client pause after a small read (default 2, 0 = off)",
    )
    p.add_argument("--cancel-rounds", type=int, help="cancel rounds per agent (default 600)")
    p.add_argument("--stop-rounds", type=int, help="slow-reader Stops per agent (default 200)")
    p.add_argument("--slow-read-bytes", type=int, help="slow reader: bytes per read (default 4096)")
    p.add_argument(
        "--slow-read-ms", type=float, help="slow reader: pause before each read (default 1)"
    )
    p.add_argument("--turns", type=int, help="prompts in the turn-overhead session (default 10000)")
    p.add_argument("--sessions", type=int, help="idle sessions in the memory test (default 1000)")
    p.add_argument("--memory-reps", type=int, help="memory runs per agent (default 3)")
    p.add_argument(
        "--timeout", type=float, help="seconds to wait for any expected output (default 30)"
    )
    return p.parse_args(argv)


def make_config(args: argparse.Namespace) -> Config:
    cfg = Config.quick() if args.quick else Config()
    overrides = {
        "startup_spawns": args.startup_spawns,
        "throughput_reps": args.throughput_reps,
        "window_s": args.window,
        "coalesce_ms": args.coalesce_ms,
        "cancel_rounds": args.cancel_rounds,
        "stop_rounds": args.stop_rounds,
        "slow_read_bytes": args.slow_read_bytes,
        "slow_read_ms": args.slow_read_ms,
        "turns": args.turns,
        "sessions": args.sessions,
        "memory_reps": args.memory_reps,
        "timeout_s": args.timeout,
    }
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = make_config(args)
    commands = {BRIDGE: args.bridge_cmd, **REFERENCE_CMDS}
    names = [n.strip() for n in args.agents.split(",") if n.strip()]
    unknown = [n for n in names if n not in commands]
    if unknown or not names:
        log(f"unknown agent(s) {unknown}; choose from {', '.join(ALL_AGENTS)}")
        return 2
    tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    if any(t not in TESTS for t in tests):
        log(f"unknown test in {tests}; choose from {', '.join(TESTS)}")
        return 2
    specs = [AgentSpec(n, commands[n]) for n in names]
    out_dir: Path = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out_dir / "logs", ignore_errors=True)

    meta: Message = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "agents": names,
        "tests": tests,
        "commands": {s.name: s.command for s in specs},
    }
    bench = Bench(specs, cfg, out_dir)
    t0 = now()
    for test in tests:
        # No collector pauses in the client while it measures.
        gc.collect()
        gc.disable()
        try:
            TESTS[test](bench)
        finally:
            gc.enable()
    meta["duration_s"] = round(now() - t0, 1)

    markdown = render_markdown(bench, meta)
    (out_dir / "results.md").write_text(markdown)
    (out_dir / "results.json").write_bytes(to_json(bench, meta))
    print(markdown, end="")
    log(write_png(out_dir / "results.png", bench))
    log(f"results: {out_dir / 'results.md'}, {out_dir / 'results.json'} ({meta['duration_s']} s)")
    failed = any(r.errors for r in bench.results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
