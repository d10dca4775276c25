"""Turn overhead as a session grows: the prompt round trip at turn 10 and at turn 10,000.

One process per agent, one session, a one-line scripted answer per prompt (the bridge's
scripted provider; the references' ``--one-line`` mode).  Each round trip is timed from
writing ``session/prompt`` to the read that holds its response; the figure at a mark is
the median of the ``turn_window`` round trips around it.  Agents run in interleaved blocks
of ``turn_block`` turns, so a slow phase of the machine is spread over all of them.

Before the first timed turn each agent is left until it is idle (`wait_idle`), so that
nothing it still does after ``session/new`` is timed as a turn.  acp-bridge's first turn
loads what a turn needs (pydantic's models: tens of milliseconds); the figure at turn 10 is
a median around it, which one slow turn does not move.

The agent's CPU time (from /proc, its children included) is also taken per block, as a
cost per turn: the first block's and the last block's are medians of hundreds of turns,
steadier than ten round trips, and they show a cost that grows with the session.

For the same reason as the idle wait, a block never ends inside a mark's window (`_block_end`): the
first round trips after the other agents' blocks measure a process woken after
seconds idle, its caches cold, and they are several times slower than the
round trips just before the pause, for every agent.  A window split by a block
boundary had half of its round trips from after a pause.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from bench.agents import AgentError, AgentProcess, log, now
from bench.procfs import CLOCK_TICKS, tree_cpu_s
from bench.results import median, rotate
from bench.runner import Bench
from bench.wire import LineStats


def turn_overhead(bench: Bench) -> None:
    cfg = bench.cfg
    marks = cfg.turn_marks
    half = cfg.turn_window // 2
    total = marks[-1] + half
    windows = {m: range(m - half + 1, m + half + 1) for m in marks}
    log(
        f"turn overhead: {total:,} one-line turns in one session per agent, "
        f"blocks of {cfg.turn_block}, marks at turns {', '.join(f'{m:,}' for m in marks)}"
    )
    procs = bench.open_each("turns", lambda p: [p.new_session()], bench.one_line)
    for proc, _ in procs.values():
        wait_idle(proc.proc.pid)
    done = dict.fromkeys(procs, 0)
    block = 0
    try:
        while procs:
            for spec in rotate(bench.specs, block):
                if spec.name not in procs:
                    continue
                proc, (sid,) = procs[spec.name]
                try:
                    end = _block_end(done[spec.name], cfg.turn_block, total, windows.values())
                    cpu0, turns = tree_cpu_s(proc.proc.pid), end - done[spec.name]
                    for _ in range(turns):
                        done[spec.name] += 1
                        turn = done[spec.name]
                        elapsed = _turn(bench, proc, sid)
                        for mark, window in windows.items():
                            if turn in window:
                                res = bench.results[spec.name]
                                res.turn_ms.setdefault(mark, []).append(elapsed * 1000)
                            if turn == mark:
                                bench.results[spec.name].turn_rss_kib[mark] = proc.rss_kib()
                    cpu_ms = (tree_cpu_s(proc.proc.pid) - cpu0) * 1000 / turns
                    bench.results[spec.name].turn_cpu_ms.append(cpu_ms)
                except (AgentError, OSError) as exc:
                    del procs[spec.name]
                    bench.fail("turns", spec.name, exc, proc)
                    continue
                if done[spec.name] >= total:
                    bench.close_each("turns", {spec.name: procs.pop(spec.name)})
                    _report(bench, spec.name, marks)
            block += 1
    finally:
        bench.close_each("turns", procs)


def _block_end(done: int, block: int, total: int, windows: Iterable[range]) -> int:
    """The last turn of the block that starts after turn ``done``: ``block`` turns
    on, or the end of a mark's window that the block would end inside."""
    end = min(done + block, total)
    inside = [w for w in windows if w.start <= end < w.stop - 1]
    while inside:  # windows that overlap: to the end of the last one reached
        end = max(w.stop - 1 for w in inside)
        inside = [w for w in windows if w.start <= end < w.stop - 1]
    return end


def wait_idle(pid: int, quiet_s: float = 0.2, limit_s: float = 5.0) -> None:
    """Return once process ``pid`` (and its children) used no CPU for ``quiet_s``
    (a clock tick or less), or after ``limit_s``."""
    deadline = now() + limit_s
    last = tree_cpu_s(pid)
    while now() < deadline:
        time.sleep(quiet_s)
        cpu = tree_cpu_s(pid)
        if cpu - last <= 1 / CLOCK_TICKS:
            return
        last = cpu


def _turn(bench: Bench, proc: AgentProcess, sid: str) -> float:
    res = bench.results[proc.spec.name]
    stats = LineStats(sid)
    t0 = now()
    stats.prompt_id = proc.start_prompt(sid, "Say done.")
    proc.pump(stats, lambda s: s.prompt_done, now() + bench.cfg.timeout_s)
    elapsed = stats.response_time[stats.prompt_id] - t0
    res.check_stop(stats, "end_turn")
    res.absorb(stats)
    return elapsed


def _report(bench: Bench, name: str, marks: tuple[int, ...]) -> None:
    res = bench.results[name]
    parts = []
    for mark in marks:
        value = median(res.turn_ms.get(mark, []))
        parts.append(f"turn {mark:,}: {value:.3f} ms" if value is not None else f"turn {mark:,}: —")
    log(f"  {name:<10} " + ", ".join(parts))
