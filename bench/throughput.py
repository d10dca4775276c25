"""Throughput: agent_message_chunk lines per second of one endless prompt, log on."""

from __future__ import annotations

from bench.agents import AgentProcess, log, now
from bench.procfs import own_cpu_s, tree_cpu_s
from bench.results import rotate
from bench.runner import Bench
from bench.wire import LineStats


def throughput(bench: Bench) -> None:
    cfg = bench.cfg
    log(f"throughput: {cfg.throughput_reps} x {cfg.window_s:g} s window per agent")
    for rep in range(cfg.throughput_reps):
        for spec in rotate(bench.specs, rep):
            bench.attempt("throughput", spec, lambda p: _throughput_once(bench, p))


def _throughput_once(bench: Bench, proc: AgentProcess) -> None:
    cfg, res = bench.cfg, bench.results[proc.spec.name]
    proc.initialize()
    sid = proc.new_session()
    stats = LineStats(sid)
    stats.prompt_id = proc.start_prompt(sid)
    deadline = now() + cfg.timeout_s

    def warmed(s: LineStats) -> bool:
        first = s.t_first_chunk
        return s.prompt_done or (first is not None and s.t_last_read - first >= cfg.warmup_s)

    coalesce = cfg.coalesce_ms / 1000
    proc.pump(stats, warmed, deadline, coalesce_s=coalesce)
    chunks0, tokens0, t0 = stats.chunks, stats.tokens, stats.t_last_read
    reads0, full0 = stats.reads, stats.full_reads
    agent_cpu0, client_cpu0 = tree_cpu_s(proc.proc.pid), own_cpu_s()
    proc.pump(
        stats,
        lambda s: s.t_last_read - t0 >= cfg.window_s or s.prompt_done,
        deadline + cfg.window_s,
        coalesce_s=coalesce,
    )
    agent_cpu, client_cpu = tree_cpu_s(proc.proc.pid) - agent_cpu0, own_cpu_s() - client_cpu0
    if stats.prompt_done:
        res.early_end += 1
        raise proc.error("the prompt ended before session/cancel")
    elapsed = stats.t_last_read - t0
    chunks = stats.chunks - chunks0
    rate = chunks / elapsed
    tokens = stats.tokens - tokens0
    res.token_rate.append(tokens / elapsed)
    res.agent_us_per_token.append(agent_cpu / max(1, tokens) * 1e6)
    res.agent_cores.append(agent_cpu / elapsed)
    res.client_cores.append(client_cpu / elapsed)
    res.agent_us_per_chunk.append(agent_cpu / max(1, chunks) * 1e6)
    res.full_pipe_pct.append(100 * (stats.full_reads - full0) / max(1, stats.reads - reads0))
    proc.cancel(sid)
    proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
    proc.settle(stats, cfg.settle_s)
    res.check_stop(stats)
    res.absorb(stats)
    res.throughput.append(rate)
    res.bytes_per_line.append(stats.bytes / max(1, stats.lines))
    if proc.state_dir is not None and proc.close() is not None:
        files, size = proc.final_log
        res.log_after_stream.append(
            {
                "files": files,
                "bytes": size,
                "chunks": stats.chunks,
                "bytes_per_chunk": size / max(1, stats.chunks),
            }
        )
    log(
        f"  {proc.spec.name:<10} {rate:>12,.0f} chunks/s  (agent {agent_cpu / elapsed:.2f} "
        f"cores, client {client_cpu / elapsed:.2f} cores)"
    )
