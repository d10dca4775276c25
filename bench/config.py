"""The benchmark's knobs: the full run's defaults and the quick smoke run's."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    startup_spawns: int = 15
    throughput_reps: int = 5
    window_s: float = 2.0
    coalesce_ms: float = 2.0  # throughput client: longest pause after a small read
    warmup_s: float = 0.25
    cancel_rounds: int = 600  # p99 of 600 is the 6th slowest, not the 2nd
    cancel_blocks: int = 4
    cancel_hold_s: float = 0.010  # stream at least this long before cancelling...
    cancel_jitter_s: float = 0.005  # ...plus a random extra, so cancels land anywhere
    stop_rounds: int = 200  # Stops through the slow-reading client
    stop_blocks: int = 4
    stop_after_chunks: int = 10  # the Stop is pressed once this many chunks were read
    slow_read_bytes: int = 4096  # the slow client reads at most this much...
    slow_read_ms: float = 1.0  # ...every this many milliseconds
    turns: int = 10_000  # prompts in one session (one-line answers)
    turn_window: int = 10  # round trips around a mark that make its median
    turn_block: int = 500  # turns per agent before the next agent's block
    sessions: int = 1000  # idle sessions, each after one short turn
    warm_sessions: int = 10
    memory_reps: int = 3
    settle_s: float = 0.2
    timeout_s: float = 30.0
    seed: int = 20261129

    @property
    def turn_marks(self) -> tuple[int, int]:
        """The turns whose overhead is reported: the 10th and the last."""
        return (min(10, self.turns), self.turns)

    @classmethod
    def quick(cls) -> Config:
        return cls(
            startup_spawns=3,
            throughput_reps=1,
            window_s=0.5,
            warmup_s=0.1,
            cancel_rounds=30,
            cancel_blocks=2,
            stop_rounds=30,
            stop_blocks=2,
            turns=300,
            turn_block=100,
            sessions=30,
            warm_sessions=3,
            memory_reps=1,
            settle_s=0.1,
        )
