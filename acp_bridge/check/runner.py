"""Running the conformance suite: agent processes, results, and the checks over all frames.

`run_check(options)` runs every scenario of `acp_bridge.check.scenarios`, each
in fresh agent processes (started with the test kit's `start_agent`), then the
checks that look at every frame of every process (schema validity, capability
gating), and returns a `Report`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import orjson

from .. import __version__
from ..testing.agent import Agent, start_agent
from .requirements import REQUIREMENTS, Tier
from .results import Evidence, Outcome, Process, Result
from .schema import BUNDLED_SOURCE, AcpSchema, bundled_schema
from .scripts import SCRIPTED_PERMISSION_PROMPT, SCRIPTED_STREAM_PROMPT, SCRIPTS

Json = dict[str, Any]

GATED_PREFIXES = ("fs/", "terminal/")
GATED_METHODS = ("elicitation/create",)
NO_CAPABILITIES: Json = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
CLIENT_INFO: Json = {"name": "acp-bridge-check", "version": __version__}

DEFAULT_STREAM_PROMPT = (
    "Write the numbers from one to two thousand in words, one per line, with no other text. "
    "Do not use any tools."
)


@dataclass
class CheckOptions:
    """What to check and how long to wait (seconds)."""

    command: list[str]
    scripted: bool = False
    """The agent is built on acp-bridge: each process gets the scripted provider
    with a script for its scenario (`acp_bridge.check.scripts`)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the checker's environment for the agent."""
    cwd: str | None = None
    """The agent's working directory (default: the checker's)."""
    session_cwd: str | None = None
    """The cwd of the sessions (default: a new temporary folder)."""
    stream_prompt: str = DEFAULT_STREAM_PROMPT
    permission_prompt: str | None = None
    stop_after: int = 3
    """Chunks to wait for before pressing Stop."""
    timeout: float = 10.0
    """For the answer of a request that needs no model (initialize, session/new, ...)."""
    stream_timeout: float = 30.0
    """For the first ``stop_after`` chunks of a prompt, or a permission request."""
    stop_timeout: float = 10.0
    """For the response of a prompt after session/cancel."""
    watch: float = 1.0
    """How long to watch for updates after a prompt's response."""
    exit_timeout: float = 5.0
    """For the agent to exit after its stdin closes."""
    only: frozenset[str] = frozenset()
    """Run only the scenarios of these checks (empty: all)."""

    def prompt(self, stimulus: str) -> str | None:
        if stimulus == "permission":
            if self.scripted:
                return SCRIPTED_PERMISSION_PROMPT
            return self.permission_prompt
        return SCRIPTED_STREAM_PROMPT if self.scripted else self.stream_prompt


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


class CheckRun:
    """The state of one run: the options, the processes started, the results so far."""

    def __init__(self, options: CheckOptions, tmp: Path, schema: AcpSchema) -> None:
        self.options = options
        self.tmp = tmp
        self.schema = schema
        self.project = Path(options.session_cwd) if options.session_cwd else tmp / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.empty_project = tmp / "project-with-no-sessions"
        self.empty_project.mkdir(exist_ok=True)
        self.results: dict[str, Result] = {}
        self.processes: list[Process] = []
        self.agent_info: Json | None = None
        self._live: list[tuple[Process, Agent]] = []
        self._numbers = count(1)

    # -- agents --------------------------------------------------------------------

    def command(self, stimulus: str, state: Path) -> list[str]:
        if not self.options.scripted:
            return list(self.options.command)
        script = self.tmp / f"{stimulus}.json"
        if not script.exists():
            script.write_text(json.dumps(SCRIPTS[stimulus]))
        return [
            *self.options.command,
            "--provider",
            "fake",
            "--script",
            str(script),
            "--state-dir",
            str(state),
        ]

    @asynccontextmanager
    async def agent(
        self, scenario: str, *, stimulus: str = "stream", state: Path | None = None
    ) -> AsyncIterator[Agent]:
        """A fresh agent process for ``scenario``; its transcript is kept for the report.

        The test editor answers no file, terminal or elicitation request (the
        checker advertises none): they get ``-32601`` and count against the agent.
        """
        number = next(self._numbers)
        state = state or self.tmp / f"state-{number}"
        command = self.command(stimulus, state)
        index = 1 + sum(p.scenario == scenario for p in self.processes)
        process = Process(scenario, index, command)
        self.processes.append(process)
        env = {**os.environ, **self.options.env} if self.options.env else None
        stderr = self.tmp / f"agent-{number}.stderr"
        async with start_agent(
            command,
            workspace=self.project,
            env=env,
            cwd=self.options.cwd,
            stderr=stderr,
            tmp=self.tmp,
        ) as agent:
            for method in list(agent.client.handlers):
                if method.startswith(GATED_PREFIXES) or method in GATED_METHODS:
                    del agent.client.handlers[method]
            self._live.append((process, agent))
            try:
                yield agent
            finally:
                self._collect(process, agent, stderr)
                self._live.remove((process, agent))

    def _collect(self, process: Process, agent: Agent, stderr: Path) -> None:
        client = agent.client
        process.transcript = client.transcript
        start = client.times[0] if client.times else 0.0
        process.times_ms = [(t - start) * 1000 for t in client.times]
        process.bad_lines = client.bad_lines
        process.returncode = client.agent.returncode
        text = stderr.read_text(errors="replace") if stderr.exists() else ""
        process.stderr_tail = "\n".join(text.splitlines()[-20:])

    def process_of(self, agent: Agent) -> Process:
        for process, live in self._live:
            if live is agent:
                return process
        raise KeyError("not a live agent of this run")

    async def initialize_response(self, agent: Agent, *, version: int = 1) -> Json:
        """``initialize`` as the checker sends it (no client capabilities at all): the
        whole response message."""
        return await agent.client.request(
            "initialize",
            {
                "protocolVersion": version,
                "clientCapabilities": NO_CAPABILITIES,
                "clientInfo": CLIENT_INFO,
            },
            within=self.options.timeout,
        )

    async def initialize(self, agent: Agent) -> Json:
        """``initialize`` (version 1, no client capabilities): the result."""
        response = await self.initialize_response(agent)
        result = response.get("result")
        if not isinstance(result, dict):
            raise RuntimeError(f"initialize was answered {json.dumps(response)[:300]}")
        if self.agent_info is None:
            self.agent_info = result
        return result

    # -- results -------------------------------------------------------------------

    def record(
        self,
        check_id: str,
        outcome: Outcome,
        detail: str,
        *,
        evidence: Sequence[tuple[Agent, Sequence[int]]] = (),
        figures: dict[str, float | int] | None = None,
    ) -> None:
        """The result of ``check_id`` (a check gets one result; a later failure
        replaces a pass, nothing replaces a failure)."""
        previous = self.results.get(check_id)
        if previous is not None and (
            previous.outcome is Outcome.FAIL or outcome is not Outcome.FAIL
        ):
            return
        items = [Evidence(self.process_of(agent), list(marks)) for agent, marks in evidence]
        self.results[check_id] = Result(
            REQUIREMENTS[check_id], outcome, detail, items, dict(figures or {})
        )

    def wanted(self, checks: Sequence[str]) -> bool:
        return not self.options.only or bool(self.options.only & set(checks))

    def advertised(self, path: str) -> bool:
        """Whether the agent's capabilities (from the first initialize) have ``path``
        (``loadSession``, ``sessionCapabilities.list``): true, or an object."""
        value: Any = (self.agent_info or {}).get("agentCapabilities") or {}
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value is True or isinstance(value, dict)


@dataclass(frozen=True)
class Scenario:
    """Something the checker plays against fresh agent processes, and the checks
    it decides (a check it did not decide when it broke off fails with the reason)."""

    name: str
    checks: tuple[str, ...]
    play: Callable[[CheckRun], Awaitable[None]]


async def run_scenarios(run: CheckRun, scenarios: Sequence[Scenario]) -> None:
    for scenario in scenarios:
        if not run.wanted(scenario.checks):
            continue
        outcome, why = Outcome.NOT_EXERCISED, "the scenario ended before it could decide this"
        try:
            await scenario.play(run)
        except Exception as exc:
            outcome, why = Outcome.FAIL, f"the scenario broke off: {type(exc).__name__}: {exc}"
        evidence = [Evidence(p, []) for p in run.processes if p.scenario == scenario.name]
        for check_id in scenario.checks:
            if check_id not in run.results:
                run.results[check_id] = Result(REQUIREMENTS[check_id], outcome, why, evidence)


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
    # An agent that streams as fast as it can sends the same chunk thousands of
    # times: validate each distinct message once.
    seen: dict[tuple[bytes, str | None], list[str]] = {}
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
            key = (orjson.dumps(msg, option=orjson.OPT_SORT_KEYS), answered)
            errors = seen.get(key)
            if errors is None:
                errors = seen[key] = run.schema.agent_message_errors(msg, answered)
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
        else:
            detail = f"all {found.received} frames from {len(run.processes)} processes are valid"
            outcome = Outcome.PASS
        run.results["stdout.valid"] = Result(
            REQUIREMENTS["stdout.valid"], outcome, detail, found.invalid
        )
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
            REQUIREMENTS["capability.gating"], outcome, detail, found.gated
        )
    checker_problems = [
        f"{p.name}: {problem}"
        for p in run.processes
        for problem in run.schema.sent_errors(p.transcript)
    ]
    sent = sum(1 for p in run.processes for d, m in p.transcript if d == "send")
    return checker_problems, sent


async def run_check(options: CheckOptions) -> Report:
    """Run the suite against ``options.command`` and return the report."""
    from .scenarios import SCENARIOS

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="acp-check-") as tmp:
        run = CheckRun(options, Path(tmp), bundled_schema())
        await run_scenarios(run, SCENARIOS)
        checker_problems, checker_frames = check_all_frames(run)
    order = {check_id: i for i, check_id in enumerate(REQUIREMENTS)}
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
        seconds=time.monotonic() - started,
    )


def run_check_sync(options: CheckOptions) -> Report:
    return anyio.run(run_check, options)


__all__ = ["CheckOptions", "CheckRun", "Report", "Scenario", "run_check", "run_check_sync"]
