"""The benchmark chart (``results.png``, copied to ``docs/bench.png``), drawn with matplotlib.

matplotlib is the optional ``bench`` extra (``pip install -e '.[bench]'``); without it the
run still writes the table and the JSON and says that the chart was skipped.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from bench.agents import BRIDGE, RAW, SDK
from bench.report import Row, build_rows, number
from bench.runner import Bench

COLORS = {BRIDGE: "#e67e22", SDK: "#3478c6", RAW: "#787878"}
OTHER = "#2ea05a"
PANELS = (  # (title, row keys drawn side by side, log scale)
    ("startup, median (ms)", ("startup_p50",), False),
    ("chunks/s with the log on (log scale)", ("throughput_p50",), True),
    ("Stop at full rate, p50 / p99 (ms)", ("cancel_p50", "cancel_p99"), False),
    ("Stop, slow reader, p50 / p99 (ms)", ("stop_p50", "stop_p99"), False),
    ("turn overhead, turn {early:,} / {late:,} (ms)", ("turn_early", "turn_late"), False),
    ("RSS per session (KiB)", ("rss_per_session",), False),
)


def write_png(path: Path, bench: Bench) -> str:
    """Draw the chart; return a line saying what was written (or why not)."""
    try:
        mpl: Any = importlib.import_module("matplotlib")
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install -e '.[bench]')"
    mpl.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    rows = {row.key: row for row in build_rows(bench.cfg)}
    names = [s.name for s in bench.specs]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (title, keys, log_scale) in zip(axes.flat, PANELS, strict=True):
        _panel(ax, bench, names, [rows[k] for k in keys], log_scale)
        early, late = bench.cfg.turn_marks
        ax.set_title(title.format(early=early, late=late), fontsize=10)
    fig.suptitle("acp-bridge vs. the SDK reference and the raw limit (same run, interleaved)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return f"chart: {path}"


def _panel(ax: Any, bench: Bench, names: list[str], rows: list[Row], log_scale: bool) -> None:
    width = 0.8 / len(rows)
    for i, row in enumerate(rows):
        values = [number(row, bench.results[n]) for n in names]
        xs = [x + (i - (len(rows) - 1) / 2) * width for x in range(len(names))]
        bars = ax.bar(
            xs,
            [v or 0.0 for v in values],
            width * 0.9,
            color=[COLORS.get(n, OTHER) for n in names],
            alpha=1.0 if i == len(rows) - 1 else 0.55,
        )
        labels = ["—" if v is None else row.fmt(v) for v in values]
        ax.bar_label(bars, labels, fontsize=7)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    if log_scale:
        ax.set_yscale("log")
    ax.margins(y=0.15)
