"""Startup (spawn -> initialize response) and shutdown (stdin EOF -> exit)."""

from __future__ import annotations

from bench.agents import AgentProcess, log, now
from bench.results import rotate
from bench.runner import Bench


def startup(bench: Bench) -> None:
    cfg = bench.cfg
    log(f"startup: {cfg.startup_spawns} spawns per agent (+1 untimed warm-up)")
    for spec in bench.specs:  # warm the bytecode and page caches
        bench.attempt("startup-warmup", spec, lambda p: p.initialize())
    for i in range(cfg.startup_spawns):
        for spec in rotate(bench.specs, i):
            bench.attempt("startup", spec, lambda p: _startup_once(bench, p))


def _startup_once(bench: Bench, proc: AgentProcess) -> None:
    rid = proc.send_request("initialize", proc.initialize_params())
    stats = proc.idle
    proc.pump(stats, lambda s: rid in s.responses, now() + proc.timeout_s)
    proc.check_initialize(stats.responses[rid])
    elapsed = stats.response_time[rid] - proc.t_spawn
    bench.results[proc.spec.name].startup_ms.append(elapsed * 1000)
