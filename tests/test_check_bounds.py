"""What ``acp-bridge check`` keeps of an agent is bounded: its frames go to a file as they
arrive (`acp_bridge.check.spool`), its stderr is read as a tail.  Asserted structurally
(where the frames are, how much is held), never as a time or a memory figure: those are
measured by ``bench/check_speed.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from support.harness import ROOT

from acp_bridge.check.report import render_json, write_json
from acp_bridge.check.run import STDERR_TAIL_BYTES, stderr_tail
from acp_bridge.check.runner import CheckOptions, run_check
from acp_bridge.check.spool import RECENT_BYTES, Spool

REFERENCE = [sys.executable, str(ROOT / "bench" / "ref_sdk_agent.py")]


def test_a_spool_keeps_its_entries_on_disk_and_only_recent_ones_in_memory(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "wire.jsonl")
    text = "x" * 100_000  # 100 kB a frame: the memory cache holds about 40 of them
    frames = [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"n": i, "t": text}}
        for i in range(200)
    ]
    for i, frame in enumerate(frames):
        spool.append(("recv", frame), at=float(i))
        spool.messages.append(frame)
    spool.append(("recv", {"jsonrpc": "2.0", "id": 1, "result": {}}), at=200.0)
    spool.messages.append({})
    assert len(spool) == 201
    assert len(spool.messages) == 201
    assert spool._recent_bytes <= RECENT_BYTES
    assert len(spool._recent) < 50, "only the last entries are held"
    assert spool[0] == ("recv", frames[0])  # read back from the file
    assert spool.messages[7] == frames[7]
    assert [m["params"]["n"] for m in spool.messages[3:6]] == [3, 4, 5]
    assert spool.position({"jsonrpc": "2.0", "id": 1, "result": {}}) == 200
    assert spool.position({"jsonrpc": "2.0", "id": 2, "result": {}}) is None
    spool.seal()
    lines = (tmp_path / "wire.jsonl").read_bytes().splitlines()
    assert len(lines) == 201
    assert [d for d, _ in spool][-1] == "recv"
    assert spool[5][1] == frames[5]


def test_the_stderr_tail_reads_only_the_end_of_a_huge_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.stderr"
    with path.open("w") as f:
        for i in range(200_000):  # about 5 MB
            f.write(f"log line {i} {'.' * 10}\n")
    tail = stderr_tail(path)
    assert len(tail.encode()) <= STDERR_TAIL_BYTES
    assert tail.splitlines()[-1].startswith("log line 199999 ")
    assert len(tail.splitlines()) == 20
    assert stderr_tail(tmp_path / "none") == ""


@pytest.mark.anyio
async def test_a_check_spools_every_frame_to_disk_and_writes_the_json_from_there() -> None:
    report = await run_check(
        CheckOptions(
            command=REFERENCE,
            only=frozenset({"stop.cancelled"}),
            watch=0.2,
            stop_timeout=30,
            stream_timeout=30,
            timeout=30,
        )
    )
    try:
        process = report.processes[0]
        wire = process.transcript
        assert isinstance(wire, Spool), "the frames are on disk, not in a list"
        assert len(wire.path.read_bytes().splitlines()) == len(wire) > 10
        assert len(process.times_ms) == len(wire)
        out = StringIO()
        write_json(report, out)
        written = json.loads(out.getvalue())
        assert written == render_json(report)
        assert written["processes"][0]["frames"] == len(wire)
    finally:
        report.close()
    assert not wire.path.exists(), "closing the report removes the wires"


# -- the Stop measured ---------------------------------------------------------------


def test_acp_bridge_reports_its_stop_figures(tmp_path: Path) -> None:
    """The real command line on acp-bridge's scripted provider: ``--stops 8`` Stops
    measured, no cancel leak, the disconnect recorded as such in its log."""
    out = tmp_path / "report.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "acp_bridge", "check", "--stops", "8", "--json", str(out)),
            *("--watch", "0.2", "--timeout", "30", "--stop-timeout", "30"),
            *("--exit-timeout", "30"),
            *("--only", "stop.cancelled", "--only", "stop.race", "--only", "stdio.eof"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stop = json.loads(out.read_text())["stop"]
    assert stop["stops"] >= 8
    assert stop["unanswered"] == 0
    assert set(stop["stop_to_response_ms"]) == {"p50", "p90", "p99", "max"}
    ms = stop["stop_to_response_ms"]
    assert 0 <= ms["p50"] <= ms["p90"] <= ms["p99"] <= ms["max"]
    assert set(stop["chunks_after_cancel"]) == {"p50", "p99"}
    assert stop["updates_after_response"]["total"] == 0
    assert stop["updates_after_response"]["per_stop"] == [0] * stop["stops"]
    assert stop["disconnect"]["recorded"] == "disconnected"
    assert stop["disconnect"]["exit"] == 0
    assert f"STOP: {stop['stops']} Stops measured" in done.stdout
    said = f"(cancel leaks): 0, in 0 of the {stop['stops']} Stops"
    assert said in done.stdout, done.stdout


@pytest.mark.anyio
async def test_a_cancel_leak_counts_in_the_stop_figures() -> None:
    faulty = [sys.executable, str(ROOT / "tests" / "faulty_sdk_agent.py"), "--leak", "2"]
    report = await run_check(
        CheckOptions(
            command=faulty,
            only=frozenset({"stop.ordering"}),
            stops=4,
            watch=0.2,
            stop_timeout=30,
            stream_timeout=30,
            timeout=30,
        )
    )
    report.close()
    stop = report.stop
    assert stop["stops"] >= 4
    assert stop["updates_after_response"]["total"] > 0
    assert all(n > 0 for n in stop["updates_after_response"]["per_stop"])
    assert stop["disconnect"] == {"observed": "not exercised"}


@pytest.mark.anyio
async def test_a_long_run_prints_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_bridge.check import runner

    monkeypatch.setattr(runner, "PROGRESS_AFTER", 0.05)
    out = StringIO()
    report = await run_check(
        CheckOptions(
            command=REFERENCE,
            only=frozenset({"stop.cancelled"}),
            stops=3,
            watch=0.5,
            stop_timeout=30,
            stream_timeout=30,
            timeout=30,
            progress=out,
        )
    )
    report.close()
    lines = out.getvalue().splitlines()
    assert lines, "a run longer than the delay says what it is doing"
    assert all(line.startswith("acp-bridge check: ") for line in lines)
    assert "scenario stop" in lines[-1]
