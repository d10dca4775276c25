"""``acp-bridge check`` against an agent that streams as fast as it can: wall time and peak RSS.

    python -m bench.check_speed                  # against bench/ref_raw_agent.py
    python -m bench.check_speed --agent sdk      # against bench/ref_sdk_agent.py
    python -m bench.check_speed --json-report    # with --json (the whole wire written)

Runs ``python -m acp_bridge check [--json FILE] -- AGENT`` once as a child process and
prints its wall time, the peak resident memory of the checker (``ru_maxrss`` of the
children, which the agent's own is part of only if larger) and the last line of its
report.  The agents stream ``agent_message_chunk`` frames until cancelled
(`bench/README.md`): the raw one writes about a million frames in a run's few seconds
of streaming, the worst case for a checker that keeps or validates frames one by one.
Speed is measured here, never asserted by the tests.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENTS = {"raw": "ref_raw_agent.py", "sdk": "ref_sdk_agent.py"}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.check_speed")
    parser.add_argument("--agent", choices=sorted(AGENTS), default="raw")
    parser.add_argument("--json-report", action="store_true", help="also write --json")
    args = parser.parse_args()
    agent = [sys.executable, str(ROOT / "bench" / AGENTS[args.agent])]
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "acp_bridge", "check"]
        if args.json_report:
            command += ["--json", str(Path(tmp) / "report.json")]
        started = time.monotonic()
        done = subprocess.run(
            [*command, "--", *agent], capture_output=True, text=True, cwd=ROOT, check=False
        )
        seconds = time.monotonic() - started
        size = (Path(tmp) / "report.json").stat().st_size if args.json_report else 0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    print(f"agent: {args.agent}; exit status {done.returncode}")
    print(f"wall time: {seconds:.1f} s; peak RSS: {peak_mb:.0f} MB")
    if args.json_report:
        print(f"JSON report: {size / 1e6:.1f} MB")
    print(f"report: {last}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
