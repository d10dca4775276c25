"""The results table (markdown), the JSON dump, and what the chart shows.

One `Row` per metric: how to get it from an `AgentResult`, how to print it, which way is
better, and whether an acp-bridge ÷ reference ratio makes sense.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from bench.agents import BRIDGE, RAW, SDK
from bench.config import Config
from bench.results import AgentResult, median, quantile
from bench.runner import Bench
from bench.wire import Message


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    better: str  # "lower" | "higher" | "0" (should be zero) | "" (informative)
    fmt: Callable[[float], str]
    value: Callable[[AgentResult], float | None]
    ratio: bool = True
    render: Callable[[AgentResult], str] | None = None  # custom cell text
    log_row: bool = False  # only meaningful for agents with a state dir


def _ms(v: float) -> str:
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _one(v: float) -> str:
    return f"{v:,.1f}"


Getter = Callable[[AgentResult], float | None]


def _q(values_of: Callable[[AgentResult], list[float]], q: float) -> Getter:
    def get(r: AgentResult) -> float | None:
        values = values_of(r)
        return quantile(values, q) if values else None

    return get


def _log_value(key: str, source: str) -> Getter:
    def get(r: AgentResult) -> float | None:
        entries: list[dict[str, float]] = getattr(r, source)
        return median([e[key] for e in entries]) if entries else None

    return get


def _turn(mark: int) -> Getter:
    def get(r: AgentResult) -> float | None:
        return median(r.turn_ms.get(mark, []))

    return get


def _growth(marks: tuple[int, int]) -> Getter:
    def get(r: AgentResult) -> float | None:
        early, late = _turn(marks[0])(r), _turn(marks[1])(r)
        return late / early if early and late is not None else None

    return get


def build_rows(cfg: Config) -> list[Row]:
    return [
        Row(
            "startup_p50",
            "startup: spawn → initialize response, median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.startup_ms, 0.5),
        ),
        Row("startup_p90", "startup: p90 (ms)", "lower", _ms, _q(lambda r: r.startup_ms, 0.9)),
        Row(
            "session_new_p50",
            "startup: spawn → session/new response (sent once initialize is answered), median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.session_new_ms, 0.5),
        ),
        Row(
            "session_new_p90",
            "startup: spawn → session/new response, p90 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.session_new_ms, 0.9),
        ),
        Row(
            "session_new_cpu_p50",
            "startup: agent CPU time from spawn to the session/new response, median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.session_new_cpu_ms, 0.5),
        ),
        Row(
            "exit_p50",
            "shutdown: stdin EOF → exit, median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.exit_ms, 0.5),
        ),
        Row(
            "throughput_p50",
            f"throughput: agent_message_chunk/s over {cfg.window_s:g} s, median",
            "higher",
            _int,
            _q(lambda r: r.throughput, 0.5),
        ),
        Row(
            "throughput_max",
            "throughput: best run (chunks/s)",
            "higher",
            _int,
            _q(lambda r: r.throughput, 1.0),
        ),
        Row(
            "token_rate_p50",
            "throughput: streamed text tokens/s (several may share a chunk), median",
            "higher",
            _int,
            _q(lambda r: r.token_rate, 0.5),
        ),
        Row(
            "agent_us_per_token",
            "agent CPU per streamed text token (µs)",
            "lower",
            _ms,
            _q(lambda r: r.agent_us_per_token, 0.5),
        ),
        Row(
            "bytes_per_line",
            "stdout bytes per line while streaming",
            "lower",
            _one,
            _q(lambda r: r.bytes_per_line, 0.5),
        ),
        Row(
            "agent_us_per_chunk",
            "agent CPU per chunk while streaming (µs)",
            "lower",
            _ms,
            _q(lambda r: r.agent_us_per_chunk, 0.5),
        ),
        Row(
            "agent_cores",
            "agent CPU while streaming (cores)",
            "",
            lambda v: f"{v:.2f}",
            _q(lambda r: r.agent_cores, 0.5),
            ratio=False,
        ),
        Row(
            "client_cores",
            "benchmark client CPU while streaming (cores)",
            "",
            lambda v: f"{v:.2f}",
            _q(lambda r: r.client_cores, 0.5),
            ratio=False,
        ),
        Row(
            "full_pipe_pct",
            "client reads that found the pipe ≥ 3/4 full (%)",
            "",
            lambda v: f"{v:.0f}",
            _q(lambda r: r.full_pipe_pct, 0.5),
            ratio=False,
        ),
        Row(
            "cancel_p50",
            "cancel at full rate → prompt response, p50 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.cancel_ms, 0.5),
        ),
        Row("cancel_p99", "cancel latency p99 (ms)", "lower", _ms, _q(lambda r: r.cancel_ms, 0.99)),
        Row("cancel_max", "cancel latency max (ms)", "lower", _ms, _q(lambda r: r.cancel_ms, 1.0)),
        Row(
            "cancel_rounds",
            "cancel rounds measured",
            "",
            _int,
            lambda r: float(len(r.cancel_ms)),
            ratio=False,
        ),
        Row(
            "stop_p50",
            f"slow reader ({cfg.slow_read_bytes} B / {cfg.slow_read_ms:g} ms): Stop after "
            f"{cfg.stop_after_chunks} chunks → prompt response, p50 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.stop_ms, 0.5),
        ),
        Row(
            "stop_p99",
            "slow reader: Stop → prompt response, p99 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.stop_ms, 0.99),
        ),
        Row(
            "stop_last_p50",
            "slow reader: Stop → last chunk read, p50 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.stop_last_chunk_ms, 0.5),
        ),
        Row(
            "stop_last_p99",
            "slow reader: Stop → last chunk read, p99 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.stop_last_chunk_ms, 0.99),
        ),
        Row(
            "stop_bytes_p50",
            "slow reader: bytes read after the Stop, p50",
            "lower",
            _int,
            _q(lambda r: r.stop_bytes_after, 0.5),
        ),
        Row(
            "stop_chunks_p99",
            "slow reader: chunks read after the Stop, p99",
            "lower",
            _int,
            _q(lambda r: r.stop_chunks_after, 0.99),
        ),
        Row(
            "stop_reads_p50",
            "slow reader: paced reads from the Stop to the one with the response, p50 "
            "(1: the least any agent can take)",
            "lower",
            _one,
            _q(lambda r: r.stop_reads, 0.5),
        ),
        Row(
            "stop_reads_p90",
            "slow reader: paced reads from the Stop to the response, p90",
            "lower",
            _one,
            _q(lambda r: r.stop_reads, 0.9),
        ),
        Row(
            "stop_rounds",
            "slow-reader Stops measured",
            "",
            _int,
            lambda r: float(len(r.stop_ms)),
            ratio=False,
        ),
        Row(
            "turn_early",
            f"turn overhead at turn {cfg.turn_marks[0]:,}: prompt round trip, one-line answer, "
            f"median of {cfg.turn_window} (ms)",
            "lower",
            _ms,
            _turn(cfg.turn_marks[0]),
        ),
        Row(
            "turn_late",
            f"turn overhead at turn {cfg.turn_marks[1]:,} of the same session (ms)",
            "lower",
            _ms,
            _turn(cfg.turn_marks[1]),
        ),
        Row(
            "turn_growth",
            f"turn {cfg.turn_marks[1]:,} ÷ turn {cfg.turn_marks[0]:,}",
            "lower",
            lambda v: f"{v:.2f}×",
            _growth(cfg.turn_marks),
            ratio=False,
        ),
        Row(
            "turn_cpu_first",
            f"agent CPU per turn, turns 1–{cfg.turn_block:,} (ms)",
            "lower",
            _ms,
            lambda r: r.turn_cpu_ms[0] if r.turn_cpu_ms else None,
        ),
        Row(
            "turn_cpu_last",
            "agent CPU per turn, the last block of turns (ms)",
            "lower",
            _ms,
            lambda r: r.turn_cpu_ms[-1] if r.turn_cpu_ms else None,
        ),
        Row(
            "turn_cpu_growth",
            "agent CPU per turn, last block ÷ first",
            "lower",
            lambda v: f"{v:.2f}×",
            lambda r: (
                r.turn_cpu_ms[-1] / r.turn_cpu_ms[0]
                if len(r.turn_cpu_ms) > 1 and r.turn_cpu_ms[0]
                else None
            ),
            ratio=False,
        ),
        Row(
            "turn_rss",
            f"RSS at turn {cfg.turn_marks[1]:,} (MiB)",
            "lower",
            lambda v: f"{v:.1f}",
            lambda r: (
                r.turn_rss_kib[cfg.turn_marks[1]] / 1024
                if cfg.turn_marks[1] in r.turn_rss_kib
                else None
            ),
        ),
        Row(
            "leaks",
            "session/update after the prompt response (leaks)",
            "0",
            _int,
            lambda r: float(r.leaks + r.foreign),
            ratio=False,
        ),
        Row(
            "wrong_stop",
            "prompt responses with the wrong stopReason",
            "0",
            _int,
            lambda r: float(r.wrong_stop),
            ratio=False,
        ),
        Row(
            "malformed",
            "malformed lines + bad sampled updates",
            "0",
            _int,
            lambda r: float(r.malformed + r.bad_samples),
            ratio=False,
        ),
        Row(
            "lines",
            "lines read / fully parsed and checked",
            "",
            _int,
            lambda r: float(r.lines),
            ratio=False,
            render=lambda r: f"{r.lines:,} / {r.sampled:,}",
        ),
        Row(
            "rss_base",
            "RSS after init + warm-up sessions (MiB)",
            "lower",
            lambda v: f"{v:.1f}",
            _q(lambda r: [k / 1024 for k in r.rss_base_kib], 0.5),
        ),
        Row(
            "rss_per_session",
            f"RSS per idle session (one short turn each), {cfg.sessions:,} sessions (KiB)",
            "lower",
            _one,
            _q(lambda r: r.per_session_kib, 0.5),
        ),
        Row(
            "rss_idle_sessions",
            f"RSS growth for {cfg.sessions:,} idle sessions (MiB)",
            "lower",
            lambda v: f"{v:.2f}",
            _q(lambda r: [k * cfg.sessions / 1024 for k in r.per_session_kib], 0.5),
        ),
        Row(
            "log_bytes",
            "event log on disk after the session test (bytes)",
            "",
            _int,
            _log_value("bytes", "log_after_sessions"),
            ratio=False,
            log_row=True,
        ),
        Row(
            "log_files",
            "event log files after the session test",
            "",
            _int,
            _log_value("files", "log_after_sessions"),
            ratio=False,
            log_row=True,
        ),
        Row(
            "log_bytes_per_chunk",
            "event log bytes per streamed chunk",
            "",
            _one,
            _log_value("bytes_per_chunk", "log_after_stream"),
            ratio=False,
            log_row=True,
        ),
    ]


def number(row: Row, res: AgentResult) -> float | None:
    value = row.value(res)
    return None if value is None or math.isnan(value) else value


def cell(row: Row, res: AgentResult | None) -> str:
    if res is None:
        return "—"
    if row.log_row and not res.has_state_dir:
        return "n/a (no log)"
    if row.render is not None:
        return row.render(res)
    value = number(row, res)
    if value is None:
        return "error" if res.errors else "—"
    return row.fmt(value)


def ratio_cell(row: Row, a: AgentResult | None, b: AgentResult | None) -> str:
    if not row.ratio or a is None or b is None:
        return ""
    va, vb = number(row, a), number(row, b)
    if va is None or not vb:
        return ""
    return f"{va / vb:.2f}×"


def render_markdown(bench: Bench, meta: Message) -> str:
    names = [s.name for s in bench.specs]
    results = bench.results
    rows = build_rows(bench.cfg)
    ratios = [(BRIDGE, ref) for ref in (SDK, RAW) if BRIDGE in names and ref in names]
    header = ["metric", "better", *names, *(f"{a} ÷ {b}" for a, b in ratios)]
    out = [
        "# acp-bridge benchmark",
        "",
        f"{meta['date']} · Python {meta['python']} · {meta['machine']} · {meta['cpus']} CPUs"
        f"{' · quick run' if meta['quick'] else ''}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", ":-:"] + ["--:"] * (len(header) - 2)) + "|",
    ]
    for row in rows:
        cells = [row.label, row.better] + [cell(row, results.get(n)) for n in names]
        cells += [ratio_cell(row, results[a], results[b]) for a, b in ratios]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Commands (`{state_dir}` is a fresh temporary directory per process):", ""]
    for spec in bench.specs:
        out.append(f"- `{spec.name}`: `{spec.command}`")
    notes = []
    for name in names:
        res = results[name]
        for err in res.errors:
            notes.append(f"- {name}: error: {err}")
        for problem in res.problems:
            notes.append(f"- {name}: {problem}")
        if res.exit_killed:
            notes.append(
                f"- {name}: {res.exit_killed} process(es) did not exit within 5 s "
                "of stdin EOF and were terminated"
            )
        if res.early_end:
            notes.append(f"- {name}: {res.early_end} prompt(s) ended before the cancel")
        if (
            name == BRIDGE
            and res.log_after_sessions
            and not any(e["bytes"] > 0 for e in res.log_after_sessions)
        ):
            notes.append(f"- {name}: the state dir stayed empty: is the event log off?")
    if notes:
        out += ["", "Notes:", "", *notes]
    return "\n".join(out) + "\n"


def to_json(bench: Bench, meta: Message) -> bytes:
    rows = build_rows(bench.cfg)
    summary = {
        name: {row.key: number(row, res) for row in rows} for name, res in bench.results.items()
    }
    labels = {row.key: row.label for row in rows}
    doc = {
        "meta": meta,
        "config": vars(bench.cfg),
        "labels": labels,
        "summary": summary,
        "agents": {name: vars(res) for name, res in bench.results.items()},
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
