"""Memory per session: RSS growth over many short sessions, and the event log's size."""

from __future__ import annotations

from bench.agents import AgentProcess, log, now
from bench.results import rotate
from bench.runner import Bench
from bench.turns import wait_idle
from bench.wire import LineStats


def memory(bench: Bench) -> None:
    cfg = bench.cfg
    log(
        f"memory: {cfg.warm_sessions} warm-up + {cfg.sessions} sessions with one short "
        f"prompt each, {cfg.memory_reps} rep(s) per agent"
    )
    for rep in range(cfg.memory_reps):
        for spec in rotate(bench.specs, rep):
            bench.attempt("memory", spec, lambda p: _memory_once(bench, p))


def _short_turn(bench: Bench, proc: AgentProcess, previous: str | None) -> str:
    cfg, res = bench.cfg, bench.results[proc.spec.name]
    sid = proc.new_session()
    stats = LineStats(sid, others=[previous] if previous else [])
    stats.prompt_id = proc.start_prompt(sid)
    proc.pump(stats, lambda s: s.chunks > 0 or s.prompt_done, now() + cfg.timeout_s)
    proc.cancel(sid)
    proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
    res.check_stop(stats)
    res.absorb(stats)
    return sid


def _memory_once(bench: Bench, proc: AgentProcess) -> None:
    cfg, res = bench.cfg, bench.results[proc.spec.name]
    proc.initialize()
    sid: str | None = None
    for _ in range(cfg.warm_sessions):
        sid = _short_turn(bench, proc, sid)
    tail = LineStats()  # no turn running: any update now is a late one
    proc.settle(tail, 0)  # everything sent so far is handled
    # What an agent loads once, after its first session (acp-bridge's warm-up
    # thread, `bench.turns.wait_idle`), belongs to the base, not to the sessions.
    wait_idle(proc.proc.pid)
    base = proc.rss_kib()
    for _ in range(cfg.sessions):
        sid = _short_turn(bench, proc, sid)
    proc.settle(tail, 0)
    after = proc.rss_kib()
    proc.settle(tail, cfg.settle_s)
    res.absorb(tail)
    res.rss_base_kib.append(base)
    res.per_session_kib.append((after - base) / cfg.sessions)
    if proc.state_dir is not None and proc.close() is not None:
        files, size = proc.final_log
        sessions = cfg.sessions + cfg.warm_sessions
        res.log_after_sessions.append(
            {
                "files": files,
                "bytes": size,
                "sessions": sessions,
                "bytes_per_session": size / sessions,
            }
        )
    log(
        f"  {proc.spec.name:<10} base {base / 1024:.1f} MiB, "
        f"{(after - base) / cfg.sessions:.1f} KiB/session"
    )
