"""Startup and shutdown, one fresh process per measurement.

Startup is timed from the spawn to the read that holds the ``initialize``
response, then, as an editor does before the user can type, ``session/new`` is
sent once ``initialize`` is answered and timed from the same spawn to its
response; the agent's CPU time up to that response is read from /proc.
Shutdown: stdin EOF -> exit.
"""

from __future__ import annotations

from bench.agents import AgentProcess, log, now
from bench.procfs import tree_cpu_s
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
    res = bench.results[proc.spec.name]
    res.startup_ms.append((stats.response_time[rid] - proc.t_spawn) * 1000)
    sid = proc.send_request("session/new", proc.session_new_params())
    proc.pump(stats, lambda s: sid in s.responses, now() + proc.timeout_s)
    proc.check_session_new(stats.responses[sid])
    res.session_new_ms.append((stats.response_time[sid] - proc.t_spawn) * 1000)
    # Read once the answer is in (the agent goes on loading afterwards); in clock
    # ticks (10 ms here), so a median of several spawns is what means something.
    res.session_new_cpu_ms.append(tree_cpu_s(proc.proc.pid) * 1000)
