"""The benchmark run: the agents, their results, and how processes are spawned for a test.

Each test (``bench/startup.py``, ``throughput.py``, ``cancel.py``, ``stop.py``,
``turns.py``, ``memory.py``) is a function of a `Bench`.  Tests that spawn a process per
measurement go through `Bench.attempt`; tests that keep one process per agent go through
`Bench.open_each` / `Bench.close_each` and run interleaved blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from bench.agents import REPO_ROOT, AgentError, AgentProcess, AgentSpec, Mode, agent_env, log
from bench.config import Config
from bench.results import AgentResult
from bench.wire import LineStats

ONE_LINE_ANSWER = "Done."


class Bench:
    def __init__(self, specs: Sequence[AgentSpec], cfg: Config, out_dir: Path) -> None:
        self.specs = list(specs)
        self.cfg = cfg
        self.log_dir = out_dir / "logs"
        self.env = agent_env(out_dir / "pycache")
        self.results = {
            s.name: AgentResult(command=s.command, has_state_dir=s.uses_state_dir) for s in specs
        }
        self._failed: set[tuple[str, str]] = set()
        scripts = out_dir / "scripts"
        scripts.mkdir(parents=True, exist_ok=True)
        self.endless = Mode("endless", REPO_ROOT / "examples" / "endless.json")
        self.one_line = Mode(
            "one-line",
            _write_script(scripts / "one-line.json", {"text": ONE_LINE_ANSWER}),
            ("--one-line",),
        )

    def spawn(self, spec: AgentSpec, mode: Mode | None = None) -> AgentProcess:
        return AgentProcess(spec, mode or self.endless, self.log_dir, self.env, self.cfg.timeout_s)

    def attempt(self, test: str, spec: AgentSpec, body: Callable[[AgentProcess], None]) -> None:
        """Run ``body`` on a fresh process; on failure record it and skip the rest of ``test``."""
        if (test, spec.name) in self._failed:
            return
        res = self.results[spec.name]
        proc: AgentProcess | None = None
        try:
            proc = self.spawn(spec)
            body(proc)
        except (AgentError, OSError) as exc:
            self._failed.add((test, spec.name))
            res.errors.append(f"{test}: {exc}")
            log(f"  ! {test}: {exc}")
        finally:
            if proc is not None:
                res.absorb(proc.idle)
                exit_ms = proc.close()
                if exit_ms is None:
                    res.exit_killed += 1
                elif test == "startup":
                    res.exit_ms.append(exit_ms)

    def open_each(
        self, test: str, setup: Callable[[AgentProcess], list[str]], mode: Mode | None = None
    ) -> dict[str, tuple[AgentProcess, list[str]]]:
        """One initialized process per agent, with the sessions ``setup`` opened."""
        procs: dict[str, tuple[AgentProcess, list[str]]] = {}
        for spec in self.specs:
            if mode is not None and not spec.supports(mode):
                self.results[spec.name].errors.append(
                    f"{test}: the command has no {{script}} to give it a {mode.name} script"
                )
                continue
            proc = None
            try:
                proc = self.spawn(spec, mode)
                proc.initialize()
                procs[spec.name] = (proc, setup(proc))
            except (AgentError, OSError) as exc:
                self.fail(test, spec.name, exc, proc)
        return procs

    def fail(self, test: str, name: str, exc: Exception, proc: AgentProcess | None) -> None:
        """Record a failed measurement and close its process."""
        res = self.results[name]
        res.errors.append(f"{test}: {exc}")
        log(f"  ! {test}: {exc}")
        if proc is not None:
            res.absorb(proc.idle)
            proc.close()

    def close_each(self, test: str, procs: dict[str, tuple[AgentProcess, list[str]]]) -> None:
        """Sync with each process, count late updates, and close it."""
        for name, (proc, _sessions) in procs.items():
            res = self.results[name]
            try:
                tail = LineStats()  # no turn running: any update now is a late one
                proc.settle(tail, self.cfg.settle_s)
                res.absorb(tail)
            except (AgentError, OSError) as exc:
                res.errors.append(f"{test}: {exc}")
            res.absorb(proc.idle)
            if proc.close() is None:
                res.exit_killed += 1


def _write_script(path: Path, event: dict[str, object]) -> Path:
    """A scripted-provider script whose every response is ``event``."""
    script = {"when_exhausted": "repeat_last", "responses": [{"events": [event]}]}
    path.write_bytes(orjson.dumps(script))
    return path
