"""What the benchmark measured, per agent, and the statistics it reports."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from bench.wire import MAX_PROBLEMS, LineStats

T = TypeVar("T")


@dataclass
class AgentResult:
    command: str
    has_state_dir: bool
    startup_ms: list[float] = field(default_factory=list)  # spawn -> initialize answered
    session_new_ms: list[float] = field(default_factory=list)  # spawn -> session/new answered
    # CPU time (user + system) the agent spent from its spawn to session/new answered
    session_new_cpu_ms: list[float] = field(default_factory=list)
    exit_ms: list[float] = field(default_factory=list)
    exit_killed: int = 0
    throughput: list[float] = field(default_factory=list)
    bytes_per_line: list[float] = field(default_factory=list)
    agent_cores: list[float] = field(default_factory=list)
    client_cores: list[float] = field(default_factory=list)
    agent_us_per_chunk: list[float] = field(default_factory=list)
    token_rate: list[float] = field(default_factory=list)  # text tokens delivered per second
    agent_us_per_token: list[float] = field(default_factory=list)
    full_pipe_pct: list[float] = field(default_factory=list)
    cancel_ms: list[float] = field(default_factory=list)
    stop_ms: list[float] = field(default_factory=list)  # slow reader: Stop -> response
    stop_last_chunk_ms: list[float] = field(default_factory=list)  # Stop -> last chunk read
    stop_bytes_after: list[float] = field(default_factory=list)  # bytes read after the Stop
    stop_chunks_after: list[float] = field(default_factory=list)  # chunks read after the Stop
    stop_reads: list[float] = field(default_factory=list)  # paced reads, Stop -> response
    turn_ms: dict[int, list[float]] = field(default_factory=dict)  # mark -> round trips
    turn_rss_kib: dict[int, float] = field(default_factory=dict)  # mark -> RSS then
    turn_cpu_ms: list[float] = field(default_factory=list)  # agent CPU per turn, block by block
    rss_base_kib: list[float] = field(default_factory=list)
    per_session_kib: list[float] = field(default_factory=list)
    log_after_stream: list[dict[str, float]] = field(default_factory=list)
    log_after_sessions: list[dict[str, float]] = field(default_factory=list)
    lines: int = 0
    sampled: int = 0
    bad_samples: int = 0
    malformed: int = 0
    leaks: int = 0
    foreign: int = 0
    wrong_stop: int = 0
    early_end: int = 0
    problems: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def absorb(self, stats: LineStats) -> None:
        self.lines += stats.lines
        self.sampled += stats.sampled
        self.bad_samples += stats.bad_samples
        self.malformed += stats.malformed
        self.leaks += stats.leaks
        self.foreign += stats.foreign
        for text in stats.problems:
            if len(self.problems) < MAX_PROBLEMS and text not in self.problems:
                self.problems.append(text)

    def check_stop(self, stats: LineStats, expected: str = "cancelled") -> None:
        resp = stats.responses.get(stats.prompt_id)
        result = resp.get("result") if resp else None
        if not isinstance(result, dict) or result.get("stopReason") != expected:
            self.wrong_stop += 1
            text = f"prompt response is not stopReason={expected}: {str(resp)[:200]}"
            if len(self.problems) < MAX_PROBLEMS:
                self.problems.append(text)


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default)."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def rotate(items: Sequence[T], i: int) -> list[T]:
    k = i % len(items)
    return [*items[k:], *items[:k]]
