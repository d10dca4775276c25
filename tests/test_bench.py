"""The benchmark runs end to end: a tiny run of every test through the real agents.

Not a speed check (no figure is asserted against a limit): it proves that
``python -m bench.run`` still drives the bridge and the references, that every
measurement produced numbers, that no agent leaked an update or answered a Stop
with anything but ``cancelled``, and that the chart is drawn with matplotlib.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.harness import ROOT

# The benchmark run behind every test here takes about a minute.
pytestmark = pytest.mark.slow

TINY = [
    "--quick",
    "--startup-spawns=1",
    "--window=0.2",
    "--cancel-rounds=4",
    "--stop-rounds=4",
    "--turns=30",
    "--sessions=5",
]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench")
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", *TINY, "--agents=acp-bridge,ref-sdk", f"--out={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.returncode, out, json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("agent", ["acp-bridge", "ref-sdk"])
def test_every_measurement_has_a_number(
    bench_run: tuple[int, Path, dict[str, Any]], agent: str
) -> None:
    _code, _out, doc = bench_run
    summary = doc["summary"][agent]
    wanted = [
        "startup_p50",
        "throughput_p50",
        "cancel_p99",
        "stop_p50",
        "stop_p99",
        "stop_last_p99",
        "stop_bytes_p50",
        "stop_reads_p50",
        "turn_early",
        "turn_late",
        "turn_cpu_first",
        "turn_cpu_last",
        "rss_per_session",
    ]
    missing = [key for key in wanted if not isinstance(summary.get(key), (int, float))]
    assert not missing, f"{agent}: no value for {missing}; errors: {doc['agents'][agent]['errors']}"
    assert summary["stop_rounds"] == 4
    # The response to a Stop is written after the Stop: at least one read finds it.
    assert min(doc["agents"][agent]["stop_reads"]) >= 1
    assert len(doc["agents"][agent]["turn_ms"]["30"]) == 10  # the round trips around turn 30


@pytest.mark.parametrize("agent", ["acp-bridge", "ref-sdk"])
def test_no_leak_and_every_stop_cancelled(
    bench_run: tuple[int, Path, dict[str, Any]], agent: str
) -> None:
    summary = bench_run[2]["summary"][agent]
    assert (summary["leaks"], summary["wrong_stop"], summary["malformed"]) == (0, 0, 0)


def test_the_chart_is_a_matplotlib_png(bench_run: tuple[int, Path, dict[str, Any]]) -> None:
    png = bench_run[1] / "results.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"matplotlib" in png.read_bytes()[:400]  # the Software text chunk
