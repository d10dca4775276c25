"""Stop latency, two ways, over many Stops in one long-lived process per agent.

``cancel_latency``: a client that reads as fast as it can; each round streams 10-15 ms at
full rate, then sends ``session/cancel`` and times the prompt response.

``stop_latency``: a client that reads at its own pace (at most ``slow_read_bytes`` every
``slow_read_ms``, an editor busy rendering) presses Stop once it has read
``stop_after_chunks`` chunks, and times, from sending ``session/cancel``, the read that
holds the prompt response and the read that holds the turn's last chunk; it also counts
the bytes and chunks it still had to read after the Stop: what sat in the pipe and in the
agent's buffers.

Rounds run in blocks, the blocks of the agents interleaved (A B C, B C A, ...), and each
round alternates between two sessions so that a late update of the previous turn shows up
as a foreign update (a leak).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from bench.agents import AgentError, AgentProcess, log, now
from bench.results import AgentResult, quantile, rotate
from bench.runner import Bench
from bench.wire import LineStats

Round = Callable[[AgentProcess, LineStats, random.Random], None]


def cancel_latency(bench: Bench) -> None:
    cfg = bench.cfg
    log(
        f"cancel latency at full rate: {cfg.cancel_rounds} rounds per agent, "
        f"{cfg.cancel_blocks} interleaved blocks"
    )

    def one(proc: AgentProcess, stats: LineStats, rng: random.Random) -> None:
        res = bench.results[proc.spec.name]
        hold = cfg.cancel_hold_s + rng.uniform(0, cfg.cancel_jitter_s)

        def streaming(s: LineStats) -> bool:
            first = s.t_first_chunk
            return s.prompt_done or (first is not None and s.t_last_read - first >= hold)

        proc.pump(stats, streaming, now() + cfg.timeout_s)
        _check_streaming(proc, stats, res)
        t_cancel = now()
        proc.cancel(stats.sid or "")
        proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
        res.cancel_ms.append((stats.response_time[stats.prompt_id] - t_cancel) * 1000)

    _rounds(bench, "cancel", cfg.cancel_rounds, cfg.cancel_blocks, one, lambda r: r.cancel_ms)


def stop_latency(bench: Bench) -> None:
    cfg = bench.cfg
    pace_s = cfg.slow_read_ms / 1000
    log(
        f"stop latency, slow reader ({cfg.slow_read_bytes} B every {cfg.slow_read_ms:g} ms, "
        f"Stop after {cfg.stop_after_chunks} chunks): {cfg.stop_rounds} Stops per agent, "
        f"{cfg.stop_blocks} interleaved blocks"
    )

    def one(proc: AgentProcess, stats: LineStats, rng: random.Random) -> None:
        res = bench.results[proc.spec.name]
        size = cfg.slow_read_bytes
        proc.pump(
            stats,
            lambda s: s.prompt_done or s.chunks >= cfg.stop_after_chunks,
            now() + cfg.timeout_s,
            read_size=size,
            pace_s=pace_s,
        )
        _check_streaming(proc, stats, res)
        bytes0, chunks0, reads0 = stats.bytes, stats.chunks, stats.reads
        t_cancel = now()
        proc.cancel(stats.sid or "")
        done = now() + cfg.timeout_s
        proc.pump(stats, lambda s: s.prompt_done, done, read_size=size, pace_s=pace_s)
        res.stop_ms.append((stats.response_time[stats.prompt_id] - t_cancel) * 1000)
        last = stats.t_last_chunk if stats.chunks > chunks0 else None
        res.stop_last_chunk_ms.append(0.0 if last is None else (last - t_cancel) * 1000)
        res.stop_bytes_after.append(float(stats.bytes - bytes0))
        res.stop_chunks_after.append(float(stats.chunks - chunks0))
        res.stop_reads.append(float(stats.reads - reads0))

    _rounds(bench, "stop", cfg.stop_rounds, cfg.stop_blocks, one, lambda r: r.stop_ms)


def _check_streaming(proc: AgentProcess, stats: LineStats, res: AgentResult) -> None:
    if stats.prompt_done:
        res.early_end += 1
        raise proc.error("the prompt ended before session/cancel")


def _rounds(
    bench: Bench,
    test: str,
    total: int,
    blocks: int,
    one: Round,
    samples: Callable[[AgentResult], list[float]],
) -> None:
    """``total`` rounds of ``one`` per agent, in ``blocks`` interleaved blocks."""
    procs = bench.open_each(test, lambda p: [p.new_session(), p.new_session()])
    rngs = {name: random.Random(bench.cfg.seed) for name in procs}  # same delays for all
    per_block = math.ceil(total / blocks)
    try:
        for block in range(blocks):
            for spec in rotate(bench.specs, block):
                if spec.name not in procs:
                    continue
                proc, sessions = procs[spec.name]
                res = bench.results[spec.name]
                try:
                    for _ in range(min(per_block, total - len(samples(res)))):
                        k = len(samples(res)) % 2
                        stats = LineStats(sessions[k], others=[sessions[1 - k]])
                        stats.prompt_id = proc.start_prompt(sessions[k])
                        one(proc, stats, rngs[spec.name])
                        res.check_stop(stats)
                        res.absorb(stats)
                except (AgentError, OSError) as exc:
                    del procs[spec.name]
                    bench.fail(test, spec.name, exc, proc)
                    continue
                got = samples(res)[-per_block:]
                log(f"  {spec.name:<10} {len(got)} rounds, p50 {quantile(got, 0.5):.3f} ms")
    finally:
        bench.close_each(test, procs)
