"""Running the conformance suite: agent processes, results, and the checks over all frames.

`run_check(options)` runs every scenario of `acp_bridge.check.scenarios`, each
in fresh agent processes (started with the test kit's `start_agent`), then the
checks that look at every frame of every process (schema validity, capability
gating), and returns a `Report`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import traceback
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from .requirements import Tier
from .results import Evidence, Outcome, Process, Result
from .run import (
    DEFAULT_STREAM_PROMPT,
    GATED_METHODS,
    GATED_PREFIXES,
    CheckOptions,
    CheckRun,
    Json,
    Scenario,
)
from .scenarios import SCENARIOS, V2_SCENARIOS
from .scenarios.stop_figures import summary as stop_summary
from .schema import BUNDLED_SOURCE, bundled_schema, bundled_source, structure


@dataclass
class Report:
    options: CheckOptions
    results: list[Result]
    processes: list[Process]
    agent_info: Json | None
    checker_frame_problems: list[str]
    checker_frames: int
    schema_source: str = BUNDLED_SOURCE
    seconds: float = 0.0
    stop: Json = field(default_factory=dict)
    """The Stop measured (`acp_bridge.check.scenarios.stop_figures.summary`)."""
    wires: Path | None = field(default=None, repr=False)
    """The folder of the processes' wires (`acp_bridge.check.spool`), removed when the
    report is closed or collected."""

    def __post_init__(self) -> None:
        if self.wires is not None:
            self._remove = weakref.finalize(self, shutil.rmtree, self.wires, True)

    def close(self) -> None:
        """Remove the wires from disk (the report can no longer show frames)."""
        if self.wires is not None:
            self._remove()

    @property
    def exit_code(self) -> int:
        """0 when the agent is conformant: no mandatory or capability check failed
        and no mandatory check was left unexercised."""
        return 1 if any(r.blocking for r in self.results) else 0

    def result(self, check_id: str) -> Result:
        for result in self.results:
            if result.requirement.id == check_id:
                return result
        raise KeyError(check_id)


async def run_scenarios(run: CheckRun, scenarios: Sequence[Scenario]) -> None:
    for scenario in scenarios:
        if not run.wanted(scenario.checks):
            continue
        outcome, why = Outcome.NOT_EXERCISED, "the scenario ended before it could decide this"
        try:
            await scenario.play(run)
        except Exception as exc:
            outcome, why = Outcome.FAIL, "the scenario broke off: " + broken_off(exc)
        mine = [p for p in run.processes if p.scenario == scenario.name]
        if outcome is Outcome.FAIL and mine:
            why += exit_note(mine[-1])
        evidence = [Evidence(p, []) for p in mine]
        for check_id in scenario.checks:
            if check_id not in run.results:
                run.results[check_id] = Result(run.requirements[check_id], outcome, why, evidence)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups: what really happened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def broken_off(exc: BaseException) -> str:
    """What broke a scenario off, unwrapped from the task groups' exception groups:
    the error the agent answered, the timeout that expired, the assertion."""
    told = []
    for leaf in leaves(exc):
        text = str(leaf)
        if not text and leaf.__traceback__ is not None:
            # A bare ``assert``: the line that failed says what was expected.
            last = traceback.extract_tb(leaf.__traceback__)[-1]
            text = f"{last.line} ({Path(last.filename).name}:{last.lineno})"
        told.append(f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__)
    return "; ".join(dict.fromkeys(told))


def exit_note(process: Process) -> str:
    """The exit status and the end of the stderr of a process a scenario broke off in."""
    note = ""
    if process.returncode is not None:
        note += f" (the agent exited with status {process.returncode})"
    if process.stderr_tail:
        tail = process.stderr_tail.replace("\n", " | ")[-300:]
        note += f"; its stderr ends: {tail}"
    return note


def _is_gated(msg: Json) -> bool:
    method = msg.get("method")
    return (
        isinstance(method, str)
        and "id" in msg
        and (method.startswith(GATED_PREFIXES) or method in GATED_METHODS)
    )


@dataclass
class _Frames:
    """What the frame checks found in every process."""

    invalid: list[Evidence] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    gated: list[Evidence] = field(default_factory=list)
    gated_methods: set[str] = field(default_factory=set)
    received: int = 0


def _scan_frames(run: CheckRun) -> _Frames:
    found = _Frames()
    # An agent that streams as fast as it can sends a million chunks that differ
    # only in their text: validate each structure once (`schema.structure`), and a
    # message whose structure is invalid on its own, for its exact errors.
    seen: dict[tuple[Any, str | None], bool] = {}
    free = run.schema.free_text_keys
    for process in run.processes:
        marks: list[int] = []
        gate_marks: list[int] = []
        methods: dict[str, str] = {}
        for i, (direction, msg) in enumerate(process.transcript):
            if direction == "send" and "method" in msg and "id" in msg:
                methods[json.dumps(msg["id"])] = msg["method"]
            if direction != "recv":
                continue
            found.received += 1
            if _is_gated(msg):
                gate_marks.append(i)
                found.gated_methods.add(str(msg["method"]))
            answered = methods.get(json.dumps(msg.get("id"))) if "method" not in msg else None
            key = (structure(msg, free), answered)
            valid = seen.get(key)
            errors = [] if valid else run.schema.agent_message_errors(msg, answered)
            if valid is None:
                seen[key] = not errors
            if errors:
                marks.append(i)
                found.problems.append(f"{process.name}, frame {i}: {errors[0]}")
        if marks or process.bad_lines:
            found.invalid.append(Evidence(process, marks))
        if gate_marks:
            found.gated.append(Evidence(process, gate_marks))
        for line in process.bad_lines[:5]:
            found.problems.append(f"{process.name}: not a JSON-RPC message: {line[:200]!r}")
    return found


def check_all_frames(run: CheckRun) -> tuple[list[str], int]:
    """``stdout.valid`` and ``capability.gating`` over every process; returns the
    problems with the checker's own frames and how many it sent."""
    found = _scan_frames(run)
    if run.wanted(("stdout.valid",)):
        if found.problems:
            detail = f"{len(found.problems)} invalid frame(s) out of {found.received}: "
            detail += "; ".join(found.problems[:5])
            outcome = Outcome.FAIL
        elif not found.received:
            detail = "the agent wrote no frame at all: nothing to validate"
            outcome = Outcome.NOT_EXERCISED
        else:
            detail = f"all {found.received} frames from {len(run.processes)} processes are valid"
            outcome = Outcome.PASS
        run.results["stdout.valid"] = Result(
            run.requirements["stdout.valid"], outcome, detail, found.invalid
        )
    # v2 has no editor-side methods to gate: an fs/* request is not valid v2 at all.
    if run.wanted(("capability.gating",)):
        if found.gated:
            detail = "the agent sent " + ", ".join(sorted(found.gated_methods))
            detail += " although the checker advertised no file system, terminal or "
            detail += "elicitation support"
            outcome = Outcome.FAIL
        else:
            detail = "no fs/*, terminal/* or elicitation/create request in any scenario"
            if not any(p.scenario == "permission" for p in run.processes):
                detail += " (no scenario made the agent use a tool: give --permission-prompt)"
            outcome = Outcome.PASS
        run.results["capability.gating"] = Result(
            run.requirements["capability.gating"], outcome, detail, found.gated
        )
    checker_problems = [
        f"{p.name}: {problem}"
        for p in run.processes
        for problem in run.schema.sent_errors(p.transcript)
    ]
    sent = sum(1 for p in run.processes for d, m in p.transcript if d == "send")
    return checker_problems, sent


PROGRESS_AFTER = 3.0
"""Seconds before the first progress line (a quick run prints none), then between lines."""


async def report_progress(run: CheckRun, started: float) -> None:
    """A line on ``options.progress`` (stderr) every `PROGRESS_AFTER` seconds: what
    is running and how many frames the agent wrote so far."""
    out = run.options.progress
    if out is None:
        return
    while True:
        await anyio.sleep(PROGRESS_AFTER)
        frames = sum(len(p.transcript) for p in run.processes)
        scenario = run.processes[-1].scenario if run.processes else "starting"
        out.write(
            f"acp-bridge check: {time.monotonic() - started:.0f} s, scenario {scenario}, "
            f"{len(run.processes)} agent process(es), {frames} frames\n"
        )
        out.flush()


async def run_check(options: CheckOptions) -> Report:
    """Run the suite against ``options.command`` and return the report."""
    started = time.monotonic()
    wires = Path(tempfile.mkdtemp(prefix="acp-check-wires-"))
    with tempfile.TemporaryDirectory(prefix="acp-check-") as tmp:
        run = CheckRun(options, Path(tmp), bundled_schema(options.protocol), wires)
        async with anyio.create_task_group() as tg:
            tg.start_soon(report_progress, run, started)
            await run_scenarios(run, V2_SCENARIOS if options.protocol == 2 else SCENARIOS)
            tg.cancel_scope.cancel()
        checker_problems, checker_frames = check_all_frames(run)
    order = {check_id: i for i, check_id in enumerate(run.requirements)}
    tiers = list(Tier)
    results = sorted(
        run.results.values(),
        key=lambda r: (tiers.index(r.requirement.tier), order[r.requirement.id]),
    )
    return Report(
        options,
        results,
        run.processes,
        run.agent_info,
        checker_problems,
        checker_frames,
        schema_source=bundled_source(options.protocol),
        seconds=time.monotonic() - started,
        stop=stop_summary(run),
        wires=wires,
    )


def run_check_sync(options: CheckOptions) -> Report:
    return anyio.run(run_check, options)


__all__ = [
    "DEFAULT_STREAM_PROMPT",
    "CheckOptions",
    "CheckRun",
    "Report",
    "Scenario",
    "run_check",
    "run_check_sync",
]
