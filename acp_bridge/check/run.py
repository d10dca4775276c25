"""One run of the conformance suite: its options, its agent processes and its
results so far, and what a scenario is.

Its own module because both the runner and the scenarios need it: the runner
plays the scenarios, the scenarios record into the run.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..agent_process import AgentProcess
from ..testing.agent import Agent, start_agent
from .requirements import Requirement
from .requirements_v2 import requirements_for
from .results import Evidence, Outcome, Process, Result
from .schema import AcpSchema
from .scripts import SCRIPTED_PERMISSION_PROMPT, SCRIPTED_STREAM_PROMPT, SCRIPTS
from .spool import Spool

Json = dict[str, Any]

GATED_PREFIXES = ("fs/", "terminal/")
GATED_METHODS = ("elicitation/create",)
NO_CAPABILITIES: Json = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
CLIENT_INFO: Json = {"name": "acp-bridge-check", "version": __version__}
TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when the checker ends an agent's process group."""

STDERR_TAIL_BYTES = 16 << 10
"""How much of the end of an agent's stderr the report keeps (the file is not read whole)."""
STDERR_TAIL_LINES = 20
BAD_LINES_KEPT = 20
"""Lines of stdout that are not JSON-RPC kept for the report (each cut at 500 bytes)."""

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
    stops: int = 20
    """Stops to make over the Stop scenarios, for the ``"stop"`` figures."""
    progress: TextIO | None = None
    """Where to write a progress line every few seconds (the command line: stderr)."""
    protocol: int = 1
    """The ACP version to check: 1, or 2 (the Stop checks in v2 terms,
    `acp_bridge.check.requirements_v2`)."""
    logout: bool = False
    """Send ``logout`` to an agent that advertises it (it may forget the
    credentials the agent keeps for its user); acp-bridge scripted gets it anyway,
    with a config folder of its own."""

    def prompt(self, stimulus: str) -> str | None:
        if stimulus == "permission":
            if self.scripted:
                return SCRIPTED_PERMISSION_PROMPT
            return self.permission_prompt
        return SCRIPTED_STREAM_PROMPT if self.scripted else self.stream_prompt


class CheckRun:
    """The state of one run: the options, the processes started, the results so far."""

    def __init__(
        self, options: CheckOptions, tmp: Path, schema: AcpSchema, wires: Path | None = None
    ) -> None:
        self.options = options
        self.tmp = tmp
        self.wires = wires or tmp
        """Where each process's wire is spooled (`acp_bridge.check.spool`)."""
        self.schema = schema
        self.requirements: dict[str, Requirement] = requirements_for(options.protocol)
        """The checks of the protocol checked: what a result is recorded against."""
        self.project = Path(options.session_cwd) if options.session_cwd else tmp / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.empty_project = tmp / "project-with-no-sessions"
        self.empty_project.mkdir(exist_ok=True)
        self.results: dict[str, Result] = {}
        self.processes: list[Process] = []
        self.agent_info: Json | None = None
        self.stop_samples: list[Json] = []
        """One entry per Stop measured (`acp_bridge.check.stop_figures`)."""
        self.disconnect: Json | None = None
        """What the agent did when its stdin closed mid-stream."""
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
        self,
        scenario: str,
        *,
        stimulus: str = "stream",
        state: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[Agent]:
        """A fresh agent process for ``scenario`` (``env``: variables for this one
        only); its transcript is kept for the report.

        The test editor answers no file, terminal or elicitation request (the
        checker advertises none): they get ``-32601`` and count against the agent.
        """
        number = next(self._numbers)
        state = state or self.tmp / f"state-{number}"
        command = self.command(stimulus, state)
        index = 1 + sum(p.scenario == scenario for p in self.processes)
        process = Process(scenario, index, command)
        self.processes.append(process)
        extra = {**self.options.env, **(env or {})}
        agent_env = {**os.environ, **extra} if extra else None
        stderr = self.tmp / f"agent-{number}.stderr"
        ended: list[AgentProcess] = []
        try:
            async with start_agent(
                command,
                workspace=self.project,
                state_dir=state if self.options.scripted else None,
                env=agent_env,
                cwd=self.options.cwd,
                stderr=stderr,
                tmp=self.tmp,
            ) as agent:
                agent.client.agent.term_grace = TERM_GRACE
                ended.append(agent.client.agent)
                for method in list(agent.client.handlers):
                    if method.startswith(GATED_PREFIXES) or method in GATED_METHODS:
                        del agent.client.handlers[method]
                spool = Spool(self.wires / f"wire-{number}.jsonl")
                spool.adopt(agent.client)
                process.transcript = spool
                self._live.append((process, agent))
                try:
                    yield agent
                finally:
                    self._collect(process, agent, stderr)
                    self._live.remove((process, agent))
                    spool.seal()
        finally:
            # Known once the group is ended, on the way out of start_agent (an
            # agent that exited on its own may not have been waited for before).
            process.survivors = [s for a in ended for s in a.survivors]
            if ended and process.returncode is None:
                process.returncode = ended[0].returncode

    def _collect(self, process: Process, agent: Agent, stderr: Path) -> None:
        client = agent.client
        start = client.times[0] if client.times else 0.0
        process.times_ms = array("d", ((t - start) * 1000 for t in client.times))
        process.bad_lines = client.bad_lines[:BAD_LINES_KEPT]
        process.bad_line_count = len(client.bad_lines)
        process.returncode = client.agent.returncode
        process.stderr_tail = stderr_tail(stderr)

    def process_of(self, agent: Agent) -> Process:
        for process, live in self._live:
            if live is agent:
                return process
        raise KeyError("not a live agent of this run")

    async def initialize_response(self, agent: Agent, *, version: int = 1) -> Json:
        """``initialize`` as the checker sends it (no client capabilities at all): the
        whole response message."""
        if version == 2:
            params: Json = {"protocolVersion": 2, "info": CLIENT_INFO, "capabilities": {}}
        else:
            params = {
                "protocolVersion": version,
                "clientCapabilities": NO_CAPABILITIES,
                "clientInfo": CLIENT_INFO,
            }
        return await agent.client.request("initialize", params, within=self.options.timeout)

    async def initialize(self, agent: Agent) -> Json:
        """``initialize`` (the version checked, no client capabilities): the result.
        An agent that answers another version than 2 to a v2 check is not checked
        further: its turns would not end the v2 way."""
        protocol = self.options.protocol
        response = await self.initialize_response(agent, version=protocol)
        result = response.get("result")
        if not isinstance(result, dict):
            raise RuntimeError(f"initialize was answered {json.dumps(response)[:300]}")
        if protocol == 2:
            if result.get("protocolVersion") != 2:
                raise RuntimeError(
                    f"initialize with protocolVersion 2 was answered protocolVersion "
                    f"{json.dumps(result.get('protocolVersion'))}: the agent does not speak v2"
                )
            agent.protocol = 2
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
            self.requirements[check_id], outcome, detail, items, dict(figures or {})
        )

    def wanted(self, checks: Sequence[str]) -> bool:
        """Whether any of ``checks`` is this protocol's and asked for (``--only``)."""
        only = self.options.only
        return any(c in self.requirements and (not only or c in only) for c in checks)

    def advertised(self, path: str) -> bool:
        """Whether the agent's capabilities (from the first initialize) have ``path``
        (``loadSession``, ``sessionCapabilities.list``; in v2 ``session``): true, or
        an object."""
        info = self.agent_info or {}
        value: Any = info.get("agentCapabilities") or info.get("capabilities") or {}
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value is True or isinstance(value, dict)


def stderr_tail(path: Path) -> str:
    """The last lines of the file ``path`` (an agent's stderr), reading at most
    `STDERR_TAIL_BYTES` of it: an agent may write hundreds of megabytes there."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - STDERR_TAIL_BYTES))
            data = f.read(STDERR_TAIL_BYTES)
    except FileNotFoundError:
        return ""
    lines = data.decode("utf-8", "replace").splitlines()
    if size > STDERR_TAIL_BYTES and lines:
        lines = lines[1:]  # the first is probably cut
    return "\n".join(lines[-STDERR_TAIL_LINES:])


@dataclass(frozen=True)
class Scenario:
    """Something the checker plays against fresh agent processes, and the checks
    it decides (a check it did not decide when it broke off fails with the reason)."""

    name: str
    checks: tuple[str, ...]
    play: Callable[[CheckRun], Awaitable[None]]


__all__ = [
    "CLIENT_INFO",
    "DEFAULT_STREAM_PROMPT",
    "GATED_METHODS",
    "GATED_PREFIXES",
    "NO_CAPABILITIES",
    "CheckOptions",
    "CheckRun",
    "Json",
    "Scenario",
    "stderr_tail",
]
