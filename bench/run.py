"""Benchmark acp-bridge against an SDK reference agent and a raw orjson agent (the limit).

Run from the repository root::

    python -m bench.run            # full run (about 2 minutes on 2 cores)
    python -m bench.run --quick    # smoke run
    python -m bench.run --agents ref-sdk,ref-raw --out /some/dir

All agents are measured in the same run, interleaved, by a small raw client (pipes +
``select``, substring counting on the hot path, sampled full parsing).  See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import gc
import importlib
import math
import os
import platform
import random
import resource
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import orjson

REPO_ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(REPO_ROOT))

from bench.chart import PALETTE, Panel, write_chart  # noqa: E402

Message = dict[str, Any]
now = time.perf_counter

BRIDGE, SDK, RAW = "acp-bridge", "ref-sdk", "ref-raw"
ALL_AGENTS = (BRIDGE, SDK, RAW)
DEFAULT_BRIDGE_CMD = (
    "{python} -m acp_bridge --provider fake --script examples/endless.json --state-dir {state_dir}"
)
REFERENCE_CMDS = {
    SDK: "{python} bench/ref_sdk_agent.py",
    RAW: "{python} bench/ref_raw_agent.py",
}
CLIENT_INFO = {"name": "acp-bench", "version": "0.1.0"}
PING_METHOD = "_acp_bench/ping"  # any answer (result or error) will do: it is a sync point
READ_SIZE = 1 << 20
COALESCE_BELOW = 16 << 10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SCRUBBED_ENV = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
MAX_PROBLEMS = 8


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    startup_spawns: int = 15
    throughput_reps: int = 5
    window_s: float = 2.0
    coalesce_ms: float = 2.0  # throughput client: longest pause after a read < 16 KiB
    warmup_s: float = 0.25
    cancel_rounds: int = 200
    cancel_blocks: int = 4
    cancel_hold_s: float = 0.010  # stream at least this long before cancelling...
    cancel_jitter_s: float = 0.005  # ...plus a random extra, so cancels land anywhere
    sessions: int = 200
    warm_sessions: int = 10
    memory_reps: int = 3
    settle_s: float = 0.2
    timeout_s: float = 30.0
    seed: int = 20261129

    @classmethod
    def quick(cls) -> Config:
        return cls(
            startup_spawns=3,
            throughput_reps=1,
            window_s=0.5,
            warmup_s=0.1,
            cancel_rounds=30,
            cancel_blocks=2,
            sessions=30,
            warm_sessions=3,
            memory_reps=1,
            settle_s=0.1,
        )


@dataclass(frozen=True)
class AgentSpec:
    """An agent command line; ``{python}`` and ``{state_dir}`` are substituted at spawn."""

    name: str
    command: str

    @property
    def uses_state_dir(self) -> bool:
        return "{state_dir}" in self.command

    def argv(self, state_dir: Path | None) -> list[str]:
        subs = {"{python}": sys.executable, "{state_dir}": str(state_dir)}
        out = []
        for arg in shlex.split(self.command):
            for key, value in subs.items():
                arg = arg.replace(key, value)
            out.append(arg)
        return out


class AgentError(RuntimeError):
    """The agent misbehaved badly enough that the current measurement is abandoned."""


# ---------------------------------------------------------------------------------------
# Client-side view of the agent's stdout
# ---------------------------------------------------------------------------------------


class LineStats:
    """Counts what the agent wrote during one phase (typically one prompt turn).

    ``feed`` takes blocks of complete lines.  A block made only of well-framed
    ``session/update`` lines of this session, before the prompt response, takes the fast
    path (substring counts, one line parsed and checked); anything else is parsed line by
    line, in order, so a response and whatever follows it are classified exactly.
    """

    def __init__(
        self,
        session_id: str | None = None,
        prompt_id: int | None = None,
        others: Sequence[str] = (),
    ) -> None:
        self.sid = session_id
        self.sid_b = session_id.encode() if session_id else b""
        self.prompt_id = prompt_id
        self.others_b = [o.encode() for o in others]
        self.sid_per_line = 0  # occurrences of the session id in one update line (learned)
        self.lines = 0
        self.bytes = 0
        self.updates = 0
        self.chunks = 0
        self.foreign = 0  # session/update for another session or outside any turn
        self.leaks = 0  # session/update for this session after the prompt response
        self.malformed = 0
        self.sampled = 0
        self.bad_samples = 0
        self.problems: list[str] = []
        self.responses: dict[Any, Message] = {}
        self.response_time: dict[Any, float] = {}
        self.agent_requests: list[Message] = []
        self.t_first_chunk: float | None = None
        self.t_last_read = 0.0
        self.reads = 0
        self.full_reads = 0  # reads that found the pipe (nearly) full: the agent may wait on us

    @property
    def prompt_done(self) -> bool:
        return self.prompt_id is not None and self.prompt_id in self.responses

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def feed(self, block: bytes, t: float) -> None:
        n = block.count(b"\n")
        self.lines += n
        self.bytes += len(block)
        if (
            self.sid_per_line
            and not self.prompt_done
            and block.count(b"session/update") == n
            and block.count(self.sid_b) == n * self.sid_per_line
            and not any(other in block for other in self.others_b)
        ):
            # Fast path: n update lines of this session, one per line, nothing else.
            chunks = block.count(b"agent_message_chunk")
            self.updates += n
            self.chunks += chunks
            if chunks and self.t_first_chunk is None:
                self.t_first_chunk = t
            first_end = block.index(b"\n")
            self._sample(block[:first_end])
            if n > 1:
                self._sample(block[block.rindex(b"\n", 0, len(block) - 1) + 1 : -1])
            return
        for line in block.split(b"\n")[:-1]:
            self._line(line, t)

    def _sample(self, line: bytes) -> None:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.malformed += 1
            self.problem(f"unparsable line: {line[:120]!r}")
            return
        self._check_update(msg)

    def _check_update(self, msg: Any) -> None:
        self.sampled += 1
        error = check_update(msg, self.sid)
        if error:
            self.bad_samples += 1
            self.problem(error)

    def _line(self, line: bytes, t: float) -> None:
        if not line.strip():
            self.problem("blank line on stdout")
            return
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            self.malformed += 1
            self.problem(f"unparsable line: {line[:120]!r}")
            return
        if not isinstance(msg, dict):
            self.malformed += 1
            self.problem(f"not a JSON object: {line[:120]!r}")
            return
        method = msg.get("method")
        if method == "session/update":
            params = msg.get("params")
            if not isinstance(params, dict) or params.get("sessionId") != self.sid or not self.sid:
                self.foreign += 1
                return
            if self.prompt_done:
                self.leaks += 1
                self.problem("session/update after the prompt response")
                return
            self.updates += 1
            if not self.sid_per_line:
                self.sid_per_line = line.count(self.sid_b)
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == "agent_message_chunk":
                self.chunks += 1
                if self.t_first_chunk is None:
                    self.t_first_chunk = t
            self._check_update(msg)
        elif isinstance(method, str):
            if "id" in msg:
                self.agent_requests.append(msg)
        elif "id" in msg and ("result" in msg or "error" in msg):
            self.responses[msg["id"]] = msg
            self.response_time[msg["id"]] = t
        else:
            self.malformed += 1
            self.problem(f"neither request, notification nor response: {line[:120]!r}")


def check_update(msg: Any, session_id: str | None) -> str | None:
    """Return what is wrong with a ``session/update`` notification, or None."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return "update without jsonrpc 2.0"
    if msg.get("method") != "session/update" or "id" in msg:
        return f"expected a session/update notification, got {str(msg)[:120]}"
    params = msg.get("params")
    if not isinstance(params, dict) or params.get("sessionId") != session_id:
        return "session/update with a wrong sessionId"
    update = params.get("update")
    if not isinstance(update, dict) or not isinstance(update.get("sessionUpdate"), str):
        return "session/update without update.sessionUpdate"
    if update["sessionUpdate"] == "agent_message_chunk":
        content = update.get("content")
        if not isinstance(content, dict) or content.get("type") != "text":
            return "agent_message_chunk without text content"
        if not isinstance(content.get("text"), str):
            return "agent_message_chunk text is not a string"
    return None


# ---------------------------------------------------------------------------------------
# Agent process
# ---------------------------------------------------------------------------------------


class AgentProcess:
    """One agent subprocess driven over pipes."""

    def __init__(
        self, spec: AgentSpec, log_dir: Path, env: dict[str, str], timeout_s: float
    ) -> None:
        self.spec = spec
        self.timeout_s = timeout_s
        self.state_dir = (
            Path(tempfile.mkdtemp(prefix="acp-bench-state-")) if spec.uses_state_dir else None
        )
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{spec.name}.stderr.log"
        self._stderr: IO[bytes] = self.stderr_path.open("ab")
        self.t_spawn = now()
        try:
            self.proc = subprocess.Popen(
                spec.argv(self.state_dir),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=REPO_ROOT,
                env=env,
                bufsize=0,
            )
        except OSError as exc:
            self._stderr.close()
            if self.state_dir is not None:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            raise AgentError(f"{spec.name}: cannot start {spec.command!r}: {exc}") from exc
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self.pipe_size = pipe_size(self.rfd)
        self.tail = b""
        self.next_id = 0
        self.idle = LineStats()  # whatever arrives outside a measured turn
        self.closed = False
        self.exit_ms: float | None = None
        self.final_log = (0, 0)  # (files, bytes) in the state dir once the agent has exited

    # -- writing ------------------------------------------------------------------------
    def send(self, msg: Message) -> None:
        data = orjson.dumps(msg) + b"\n"
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.wfd, view) :]
        except BrokenPipeError as exc:
            raise self.error("stdin closed", exiting=True) from exc

    def send_request(self, method: str, params: Message) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    # -- reading ------------------------------------------------------------------------
    def error(self, what: str, exiting: bool = False) -> AgentError:
        """An AgentError with the exit status and the end of the agent's stderr."""
        if exiting:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=1)
        code = self.proc.poll()
        self._stderr.flush()
        try:
            tail = self.stderr_path.read_bytes()[-600:].decode("utf-8", "replace").strip()
        except OSError:
            tail = ""
        status = "running" if code is None else f"exit code {code}"
        detail = f"; stderr tail: {tail[-400:]}" if tail else ""
        return AgentError(f"{self.spec.name}: {what} ({status}){detail}")

    def _read(self, deadline: float, timeout_ok: bool) -> bytes | None:
        remaining = deadline - now()
        if remaining <= 0 or not select.select([self.rfd], [], [], remaining)[0]:
            if timeout_ok:
                return None
            raise self.error("timed out waiting for output")
        data = os.read(self.rfd, READ_SIZE)
        if not data:
            raise self.error("stdout closed", exiting=True)
        return data

    def pump(
        self,
        stats: LineStats,
        stop: Callable[[LineStats], bool],
        deadline: float,
        timeout_ok: bool = False,
        coalesce_s: float = 0.0,
    ) -> None:
        """Read and classify output into ``stats`` until ``stop(stats)`` or the deadline.

        ``coalesce_s`` > 0: after a small read, pause (at most that long) so that the next
        read gets a bigger batch: fewer client wake-ups competing with the agent for the
        CPUs.  The pause is capped so that, at the rate seen so far, the agent fills at most
        a quarter of the pipe meanwhile: the agent never blocks on a full pipe.
        """
        while not stop(stats):
            data = self._read(deadline, timeout_ok)
            if data is None:
                return
            if coalesce_s and len(data) < COALESCE_BELOW:
                time.sleep(self._pause(stats, coalesce_s))
            t = now()
            stats.t_last_read = t
            stats.reads += 1
            if len(data) * 4 >= self.pipe_size * 3:
                stats.full_reads += 1
            buf = self.tail + data if self.tail else data
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                self.tail = buf
                continue
            self.tail = buf[cut:]
            stats.feed(buf if cut == len(buf) else buf[:cut], t)
            while stats.agent_requests:  # we advertise no client capability: refuse
                req = stats.agent_requests.pop()
                error = {"code": -32601, "message": "Method not found"}
                self.send({"jsonrpc": "2.0", "id": req["id"], "error": error})
                stats.problem(f"agent called the client: {req.get('method')}")

    def _pause(self, stats: LineStats, longest: float) -> float:
        first = stats.t_first_chunk
        elapsed = now() - first if first is not None else 0.0
        if elapsed < 0.01:
            return min(longest, 0.0005)  # no rate known yet: be careful
        rate = stats.bytes / elapsed  # bytes/s, roughly (includes the first read)
        return min(longest, self.pipe_size / 4 / rate)

    def request(self, method: str, params: Message, stats: LineStats | None = None) -> Message:
        stats = stats or self.idle
        rid = self.send_request(method, params)
        self.pump(stats, lambda s: rid in s.responses, now() + self.timeout_s)
        return stats.responses[rid]

    def result(self, method: str, params: Message) -> Message:
        resp = self.request(method, params)
        if "error" in resp or not isinstance(resp.get("result"), dict):
            raise self.error(f"{method} failed: {str(resp)[:300]}")
        result: Message = resp["result"]
        return result

    # -- ACP flows ----------------------------------------------------------------------
    @staticmethod
    def initialize_params() -> Message:
        return {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "terminal": False,
            },
            "clientInfo": CLIENT_INFO,
        }

    def check_initialize(self, resp: Message) -> None:
        result = resp.get("result")
        if not isinstance(result, dict) or result.get("protocolVersion") != 1:
            raise self.error(f"bad initialize response: {str(resp)[:300]}")

    def initialize(self) -> None:
        self.check_initialize(self.request("initialize", self.initialize_params()))

    def new_session(self) -> str:
        result = self.result("session/new", {"cwd": str(REPO_ROOT), "mcpServers": []})
        sid = result.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise self.error(f"session/new without sessionId: {result}")
        return sid

    def start_prompt(self, session_id: str) -> int:
        prompt = [{"type": "text", "text": "stream tokens until cancelled"}]
        return self.send_request("session/prompt", {"sessionId": session_id, "prompt": prompt})

    def cancel(self, session_id: str) -> None:
        self.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        )

    def settle(self, stats: LineStats, grace_s: float) -> None:
        """Sync with a ping, then keep listening ``grace_s`` for late (leaked) updates."""
        rid = self.send_request(PING_METHOD, {})
        self.pump(stats, lambda s: rid in s.responses, now() + self.timeout_s)
        self.pump(stats, lambda s: False, now() + grace_s, timeout_ok=True)

    def rss_kib(self) -> int:
        return tree_rss_kib(self.proc.pid)

    # -- shutdown -----------------------------------------------------------------------
    def close(self) -> float | None:
        """Close stdin and wait; return ms until exit, or None if it had to be killed.

        Idempotent.  Before removing the state dir, its usage is kept in ``final_log``.
        """
        if self.closed:
            return self.exit_ms
        self.closed = True
        t0 = now()
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        exit_ms: float | None
        try:
            self.proc.wait(timeout=5)
            exit_ms = (now() - t0) * 1000
        except subprocess.TimeoutExpired:
            exit_ms = None
            self.proc.stdout.close()  # unblock a writer stuck on a full pipe
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.proc.stdout.closed:
            self.proc.stdout.close()
        self._stderr.close()
        if self.state_dir is not None:
            self.final_log = dir_usage(self.state_dir)
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.exit_ms = exit_ms
        return exit_ms


def pipe_size(fd: int) -> int:
    """Capacity of the pipe ``fd`` (Linux F_GETPIPE_SZ), else the usual 64 KiB."""
    try:
        return int(fcntl.fcntl(fd, getattr(fcntl, "F_GETPIPE_SZ", 1032)))
    except OSError:
        return 1 << 16


def agent_env(pycache: Path) -> dict[str, str]:
    """The environment of every agent: ours, minus PYTHONUNBUFFERED, with bytecode caching.

    Bytecode is cached in a private tree (PYTHONPYCACHEPREFIX) so that, after the warm-up
    spawn, no agent pays for compiling its modules at every start, whatever
    PYTHONDONTWRITEBYTECODE says, and without writing into the source tree.
    """
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` plus its descendants (in case the command is a wrapper)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_rss_kib(int(child))
    except (OSError, ValueError):
        pass
    return total


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` plus its descendants."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_cpu_s(int(child))
    except (OSError, ValueError, IndexError):
        pass
    return total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dir_usage(path: Path | None) -> tuple[int, int]:
    """(number of files, total bytes) under ``path``."""
    files = size = 0
    if path is None:
        return 0, 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass
class AgentResult:
    command: str
    has_state_dir: bool
    startup_ms: list[float] = field(default_factory=list)
    exit_ms: list[float] = field(default_factory=list)
    exit_killed: int = 0
    throughput: list[float] = field(default_factory=list)
    bytes_per_line: list[float] = field(default_factory=list)
    agent_cores: list[float] = field(default_factory=list)
    client_cores: list[float] = field(default_factory=list)
    agent_us_per_chunk: list[float] = field(default_factory=list)
    full_pipe_pct: list[float] = field(default_factory=list)
    cancel_ms: list[float] = field(default_factory=list)
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

    def check_stop(self, stats: LineStats) -> None:
        resp = stats.responses.get(stats.prompt_id)
        result = resp.get("result") if resp else None
        if not isinstance(result, dict) or result.get("stopReason") != "cancelled":
            self.wrong_stop += 1
            text = f"prompt response is not stopReason=cancelled: {str(resp)[:200]}"
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


def rotate(items: Sequence[AgentSpec], i: int) -> list[AgentSpec]:
    k = i % len(items)
    return [*items[k:], *items[:k]]


# ---------------------------------------------------------------------------------------
# Benchmarks
# ---------------------------------------------------------------------------------------


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

    def spawn(self, spec: AgentSpec) -> AgentProcess:
        return AgentProcess(spec, self.log_dir, self.env, self.cfg.timeout_s)

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

    # -- startup ------------------------------------------------------------------------
    def startup(self) -> None:
        cfg = self.cfg
        log(f"startup: {cfg.startup_spawns} spawns per agent (+1 untimed warm-up)")
        for spec in self.specs:  # warm the bytecode and page caches
            self.attempt("startup-warmup", spec, lambda p: p.initialize())
        for i in range(cfg.startup_spawns):
            for spec in rotate(self.specs, i):
                self.attempt("startup", spec, self._startup_once)

    def _startup_once(self, proc: AgentProcess) -> None:
        rid = proc.send_request("initialize", proc.initialize_params())
        stats = proc.idle
        proc.pump(stats, lambda s: rid in s.responses, now() + proc.timeout_s)
        proc.check_initialize(stats.responses[rid])
        elapsed = stats.response_time[rid] - proc.t_spawn
        self.results[proc.spec.name].startup_ms.append(elapsed * 1000)

    # -- throughput ---------------------------------------------------------------------
    def throughput(self) -> None:
        cfg = self.cfg
        log(f"throughput: {cfg.throughput_reps} x {cfg.window_s:g} s window per agent")
        for rep in range(cfg.throughput_reps):
            for spec in rotate(self.specs, rep):
                self.attempt("throughput", spec, self._throughput_once)

    def _throughput_once(self, proc: AgentProcess) -> None:
        cfg, res = self.cfg, self.results[proc.spec.name]
        proc.initialize()
        sid = proc.new_session()
        stats = LineStats(sid)
        stats.prompt_id = proc.start_prompt(sid)
        deadline = now() + cfg.timeout_s

        def warmed(s: LineStats) -> bool:
            first = s.t_first_chunk
            return s.prompt_done or (first is not None and s.t_last_read - first >= cfg.warmup_s)

        coalesce = cfg.coalesce_ms / 1000
        proc.pump(stats, warmed, deadline, coalesce_s=coalesce)
        chunks0, t0 = stats.chunks, stats.t_last_read
        reads0, full0 = stats.reads, stats.full_reads
        agent_cpu0, client_cpu0 = tree_cpu_s(proc.proc.pid), own_cpu_s()
        proc.pump(
            stats,
            lambda s: s.t_last_read - t0 >= cfg.window_s or s.prompt_done,
            deadline + cfg.window_s,
            coalesce_s=coalesce,
        )
        agent_cpu, client_cpu = tree_cpu_s(proc.proc.pid) - agent_cpu0, own_cpu_s() - client_cpu0
        if stats.prompt_done:
            res.early_end += 1
            raise proc.error("the prompt ended before session/cancel")
        elapsed = stats.t_last_read - t0
        chunks = stats.chunks - chunks0
        rate = chunks / elapsed
        res.agent_cores.append(agent_cpu / elapsed)
        res.client_cores.append(client_cpu / elapsed)
        res.agent_us_per_chunk.append(agent_cpu / max(1, chunks) * 1e6)
        res.full_pipe_pct.append(100 * (stats.full_reads - full0) / max(1, stats.reads - reads0))
        proc.cancel(sid)
        proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
        proc.settle(stats, cfg.settle_s)
        res.check_stop(stats)
        res.absorb(stats)
        res.throughput.append(rate)
        res.bytes_per_line.append(stats.bytes / max(1, stats.lines))
        if proc.state_dir is not None and proc.close() is not None:
            files, size = proc.final_log
            res.log_after_stream.append(
                {
                    "files": files,
                    "bytes": size,
                    "chunks": stats.chunks,
                    "bytes_per_chunk": size / max(1, stats.chunks),
                }
            )
        log(
            f"  {proc.spec.name:<10} {rate:>12,.0f} chunks/s  (agent {agent_cpu / elapsed:.2f} "
            f"cores, client {client_cpu / elapsed:.2f} cores)"
        )

    # -- cancel latency -----------------------------------------------------------------
    def cancel_latency(self) -> None:
        cfg = self.cfg
        log(
            f"cancel latency: {cfg.cancel_rounds} rounds per agent, one process each, "
            f"{cfg.cancel_blocks} interleaved blocks"
        )
        procs: dict[str, tuple[AgentProcess, list[str], random.Random]] = {}
        try:
            for spec in self.specs:
                proc = None
                try:
                    proc = self.spawn(spec)
                    proc.initialize()
                    sessions = [proc.new_session(), proc.new_session()]
                    procs[spec.name] = (proc, sessions, random.Random(cfg.seed))
                except (AgentError, OSError) as exc:
                    self.results[spec.name].errors.append(f"cancel: {exc}")
                    log(f"  ! cancel: {exc}")
                    if proc is not None:
                        proc.close()
            per_block = math.ceil(cfg.cancel_rounds / cfg.cancel_blocks)
            for block in range(cfg.cancel_blocks):
                for spec in rotate(self.specs, block):
                    if spec.name in procs:
                        self._cancel_block(spec.name, procs, per_block)
        finally:
            for name, (proc, _sessions, _rng) in procs.items():
                res = self.results[name]
                try:
                    tail = LineStats()  # no turn running: any update now is a late one
                    proc.settle(tail, cfg.settle_s)
                    res.absorb(tail)
                except (AgentError, OSError) as exc:
                    res.errors.append(f"cancel: {exc}")
                res.absorb(proc.idle)
                if proc.close() is None:
                    res.exit_killed += 1

    def _cancel_block(
        self,
        name: str,
        procs: dict[str, tuple[AgentProcess, list[str], random.Random]],
        rounds: int,
    ) -> None:
        cfg, res = self.cfg, self.results[name]
        proc, sessions, rng = procs[name]
        try:
            for _ in range(min(rounds, cfg.cancel_rounds - len(res.cancel_ms))):
                # Alternate two sessions: an update of the previous turn arriving during
                # this one is caught as a "foreign" update, i.e. a leak.
                k = len(res.cancel_ms) % 2
                sid, other = sessions[k], sessions[1 - k]
                stats = LineStats(sid, others=[other])
                stats.prompt_id = proc.start_prompt(sid)
                hold = cfg.cancel_hold_s + rng.uniform(0, cfg.cancel_jitter_s)

                def streaming(s: LineStats, hold: float = hold) -> bool:
                    first = s.t_first_chunk
                    return s.prompt_done or (first is not None and s.t_last_read - first >= hold)

                proc.pump(stats, streaming, now() + cfg.timeout_s)
                if stats.prompt_done:
                    res.early_end += 1
                    raise proc.error("the prompt ended before session/cancel")
                t_cancel = now()
                proc.cancel(sid)
                proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
                res.cancel_ms.append((stats.response_time[stats.prompt_id] - t_cancel) * 1000)
                res.check_stop(stats)
                res.absorb(stats)
        except (AgentError, OSError) as exc:
            res.errors.append(f"cancel: {exc}")
            log(f"  ! cancel: {exc}")
            procs.pop(name)
            res.absorb(proc.idle)
            proc.close()
            return
        got = res.cancel_ms[-rounds:]
        log(f"  {name:<10} {len(got)} rounds, p50 {quantile(got, 0.5):.3f} ms")

    # -- memory -------------------------------------------------------------------------
    def memory(self) -> None:
        cfg = self.cfg
        log(
            f"memory: {cfg.warm_sessions} warm-up + {cfg.sessions} sessions with one short "
            f"prompt each, {cfg.memory_reps} rep(s) per agent"
        )
        for rep in range(cfg.memory_reps):
            for spec in rotate(self.specs, rep):
                self.attempt("memory", spec, self._memory_once)

    def _short_turn(self, proc: AgentProcess, previous: str | None) -> str:
        cfg, res = self.cfg, self.results[proc.spec.name]
        sid = proc.new_session()
        stats = LineStats(sid, others=[previous] if previous else [])
        stats.prompt_id = proc.start_prompt(sid)
        proc.pump(stats, lambda s: s.chunks > 0 or s.prompt_done, now() + cfg.timeout_s)
        proc.cancel(sid)
        proc.pump(stats, lambda s: s.prompt_done, now() + cfg.timeout_s)
        res.check_stop(stats)
        res.absorb(stats)
        return sid

    def _memory_once(self, proc: AgentProcess) -> None:
        cfg, res = self.cfg, self.results[proc.spec.name]
        proc.initialize()
        sid: str | None = None
        for _ in range(cfg.warm_sessions):
            sid = self._short_turn(proc, sid)
        time.sleep(0.2)
        base = proc.rss_kib()
        for _ in range(cfg.sessions):
            sid = self._short_turn(proc, sid)
        time.sleep(0.2)
        after = proc.rss_kib()
        tail = LineStats()  # no turn running: any update now is a late one
        proc.settle(tail, cfg.settle_s)
        res.absorb(tail)
        res.rss_base_kib.append(base)
        res.per_session_kib.append((after - base) / cfg.sessions)
        if proc.state_dir is not None and proc.close() is not None:
            files, size = proc.final_log
            sessions = cfg.sessions + cfg.warm_sessions
            res.log_after_sessions.append(
                {
                    "files": files,
                    "bytes": size,
                    "sessions": sessions,
                    "bytes_per_session": size / sessions,
                }
            )
        log(
            f"  {proc.spec.name:<10} base {base / 1024:.1f} MiB, "
            f"{(after - base) / cfg.sessions:.1f} KiB/session"
        )

    def run(self, tests: Sequence[str]) -> None:
        for test in tests:
            # No collector pauses in the client while it measures.
            gc.collect()
            gc.disable()
            try:
                getattr(self, test)()
            finally:
                gc.enable()


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    better: str  # "lower" | "higher" | "0" (should be zero) | "" (informative)
    fmt: Callable[[float], str]
    value: Callable[[AgentResult], float | None]
    ratio: bool = True
    render: Callable[[AgentResult], str] | None = None  # custom cell text
    log_row: bool = False  # only meaningful for agents with a state dir


def _ms(v: float) -> str:
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _one(v: float) -> str:
    return f"{v:,.1f}"


Getter = Callable[[AgentResult], float | None]


def _q(values_of: Callable[[AgentResult], list[float]], q: float) -> Getter:
    def get(r: AgentResult) -> float | None:
        values = values_of(r)
        return quantile(values, q) if values else None

    return get


def _log_value(key: str, source: str) -> Getter:
    def get(r: AgentResult) -> float | None:
        entries: list[dict[str, float]] = getattr(r, source)
        return median([e[key] for e in entries]) if entries else None

    return get


def build_rows(cfg: Config) -> list[Row]:
    return [
        Row(
            "startup_p50",
            "startup: spawn → initialize response, median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.startup_ms, 0.5),
        ),
        Row("startup_p90", "startup: p90 (ms)", "lower", _ms, _q(lambda r: r.startup_ms, 0.9)),
        Row(
            "exit_p50",
            "shutdown: stdin EOF → exit, median (ms)",
            "lower",
            _ms,
            _q(lambda r: r.exit_ms, 0.5),
        ),
        Row(
            "throughput_p50",
            f"throughput: agent_message_chunk/s over {cfg.window_s:g} s, median",
            "higher",
            _int,
            _q(lambda r: r.throughput, 0.5),
        ),
        Row(
            "throughput_max",
            "throughput: best run (chunks/s)",
            "higher",
            _int,
            _q(lambda r: r.throughput, 1.0),
        ),
        Row(
            "bytes_per_line",
            "stdout bytes per line while streaming",
            "lower",
            _one,
            _q(lambda r: r.bytes_per_line, 0.5),
        ),
        Row(
            "agent_us_per_chunk",
            "agent CPU per chunk while streaming (µs)",
            "lower",
            _ms,
            _q(lambda r: r.agent_us_per_chunk, 0.5),
        ),
        Row(
            "agent_cores",
            "agent CPU while streaming (cores)",
            "",
            lambda v: f"{v:.2f}",
            _q(lambda r: r.agent_cores, 0.5),
            ratio=False,
        ),
        Row(
            "client_cores",
            "benchmark client CPU while streaming (cores)",
            "",
            lambda v: f"{v:.2f}",
            _q(lambda r: r.client_cores, 0.5),
            ratio=False,
        ),
        Row(
            "full_pipe_pct",
            "client reads that found the pipe ≥ 3/4 full (%)",
            "",
            lambda v: f"{v:.0f}",
            _q(lambda r: r.full_pipe_pct, 0.5),
            ratio=False,
        ),
        Row(
            "cancel_p50",
            "cancel at full rate → prompt response, p50 (ms)",
            "lower",
            _ms,
            _q(lambda r: r.cancel_ms, 0.5),
        ),
        Row("cancel_p99", "cancel latency p99 (ms)", "lower", _ms, _q(lambda r: r.cancel_ms, 0.99)),
        Row("cancel_max", "cancel latency max (ms)", "lower", _ms, _q(lambda r: r.cancel_ms, 1.0)),
        Row(
            "cancel_rounds",
            "cancel rounds measured",
            "",
            _int,
            lambda r: float(len(r.cancel_ms)),
            ratio=False,
        ),
        Row(
            "leaks",
            "session/update after the prompt response (leaks)",
            "0",
            _int,
            lambda r: float(r.leaks + r.foreign),
            ratio=False,
        ),
        Row(
            "wrong_stop",
            "prompt responses other than cancelled",
            "0",
            _int,
            lambda r: float(r.wrong_stop),
            ratio=False,
        ),
        Row(
            "malformed",
            "malformed lines + bad sampled updates",
            "0",
            _int,
            lambda r: float(r.malformed + r.bad_samples),
            ratio=False,
        ),
        Row(
            "lines",
            "lines read / fully parsed and checked",
            "",
            _int,
            lambda r: float(r.lines),
            ratio=False,
            render=lambda r: f"{r.lines:,} / {r.sampled:,}",
        ),
        Row(
            "rss_base",
            "RSS after init + warm-up sessions (MiB)",
            "lower",
            lambda v: f"{v:.1f}",
            _q(lambda r: [k / 1024 for k in r.rss_base_kib], 0.5),
        ),
        Row(
            "rss_per_session",
            f"RSS per session, {cfg.sessions} sessions (KiB)",
            "lower",
            _one,
            _q(lambda r: r.per_session_kib, 0.5),
        ),
        Row(
            "log_bytes",
            "event log on disk after the session test (bytes)",
            "",
            _int,
            _log_value("bytes", "log_after_sessions"),
            ratio=False,
            log_row=True,
        ),
        Row(
            "log_files",
            "event log files after the session test",
            "",
            _int,
            _log_value("files", "log_after_sessions"),
            ratio=False,
            log_row=True,
        ),
        Row(
            "log_bytes_per_chunk",
            "event log bytes per streamed chunk",
            "",
            _one,
            _log_value("bytes_per_chunk", "log_after_stream"),
            ratio=False,
            log_row=True,
        ),
    ]


def _number(row: Row, res: AgentResult) -> float | None:
    value = row.value(res)
    return None if value is None or math.isnan(value) else value


def cell(row: Row, res: AgentResult | None) -> str:
    if res is None:
        return "—"
    if row.log_row and not res.has_state_dir:
        return "n/a (no log)"
    if row.render is not None:
        return row.render(res)
    value = _number(row, res)
    if value is None:
        return "error" if res.errors else "—"
    return row.fmt(value)


def ratio_cell(row: Row, a: AgentResult | None, b: AgentResult | None) -> str:
    if not row.ratio or a is None or b is None:
        return ""
    va, vb = _number(row, a), _number(row, b)
    if va is None or not vb:
        return ""
    return f"{va / vb:.2f}×"


def render_markdown(bench: Bench, meta: Message) -> str:
    names = [s.name for s in bench.specs]
    results = bench.results
    rows = build_rows(bench.cfg)
    ratios = [(BRIDGE, ref) for ref in (SDK, RAW) if BRIDGE in names and ref in names]
    header = ["metric", "better", *names, *(f"{a} ÷ {b}" for a, b in ratios)]
    out = [
        "# acp-bridge benchmark",
        "",
        f"{meta['date']} · Python {meta['python']} · {meta['machine']} · {meta['cpus']} CPUs"
        f"{' · quick run' if meta['quick'] else ''}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---", ":-:"] + ["--:"] * (len(header) - 2)) + "|",
    ]
    for row in rows:
        cells = [row.label, row.better] + [cell(row, results.get(n)) for n in names]
        cells += [ratio_cell(row, results[a], results[b]) for a, b in ratios]
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "Commands (`{state_dir}` is a fresh temporary directory per process):", ""]
    for spec in bench.specs:
        out.append(f"- `{spec.name}`: `{spec.command}`")
    notes = []
    for name in names:
        res = results[name]
        for err in res.errors:
            notes.append(f"- {name}: error: {err}")
        for problem in res.problems:
            notes.append(f"- {name}: {problem}")
        if res.exit_killed:
            notes.append(
                f"- {name}: {res.exit_killed} process(es) did not exit within 5 s "
                "of stdin EOF and were terminated"
            )
        if res.early_end:
            notes.append(f"- {name}: {res.early_end} prompt(s) ended before the cancel")
        if (
            name == BRIDGE
            and res.log_after_sessions
            and not any(e["bytes"] > 0 for e in res.log_after_sessions)
        ):
            notes.append(f"- {name}: the state dir stayed empty: is the event log off?")
    if notes:
        out += ["", "Notes:", "", *notes]
    return "\n".join(out) + "\n"


CHART_ROWS = (  # (row key, panel title, log scale)
    ("startup_p50", "startup median (ms)", False),
    ("throughput_p50", "chunks/s (log scale)", True),
    ("cancel_p99", "cancel p99 (ms)", False),
    ("rss_per_session", "RSS per session (KiB)", False),
)
AGENT_COLORS = {BRIDGE: PALETTE[0], SDK: PALETTE[1], RAW: PALETTE[2]}


def chart_panels(bench: Bench) -> list[Panel]:
    rows = {row.key: row for row in build_rows(bench.cfg)}
    colors = [AGENT_COLORS.get(s.name, PALETTE[3]) for s in bench.specs]
    return [
        Panel(
            title,
            [(s.name, _number(rows[key], bench.results[s.name])) for s in bench.specs],
            colors,
            log_scale,
        )
        for key, title, log_scale in CHART_ROWS
    ]


def write_png(path: Path, bench: Bench) -> str:
    panels = chart_panels(bench)
    title = "acp-bridge vs references"
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        write_chart(path, panels, title)
        return f"chart written with the built-in PNG writer: {path}"
    mpl = importlib.import_module("matplotlib")
    mpl.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, panel in zip(axes.flat, panels, strict=False):
        labels = [label for label, _ in panel.bars]
        values = [value or 0.0 for _, value in panel.bars]
        colors = [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in panel.colors]
        ax.bar(labels, values, color=colors[: len(labels)])
        ax.set_title(panel.title)
        if panel.log_scale:
            ax.set_yscale("log")
        for x, value in enumerate(values):
            ax.annotate(f"{value:,.3g}", (x, value), ha="center", va="bottom")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return f"chart written with matplotlib: {path}"


def to_json(bench: Bench, meta: Message) -> bytes:
    rows = build_rows(bench.cfg)
    summary = {
        name: {row.key: _number(row, res) for row in rows} for name, res in bench.results.items()
    }
    labels = {row.key: row.label for row in rows}
    doc = {
        "meta": meta,
        "config": vars(bench.cfg),
        "labels": labels,
        "summary": summary,
        "agents": {name: vars(res) for name, res in bench.results.items()},
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.run",
        description="Benchmark acp-bridge against an SDK reference agent and a raw agent.",
    )
    p.add_argument(
        "--quick", action="store_true", help="small N: a smoke run (~15 s instead of ~2 min)"
    )
    p.add_argument(
        "--agents",
        default=",".join(ALL_AGENTS),
        help=f"comma-separated subset of {', '.join(ALL_AGENTS)}",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "bench" / "out",
        help="output directory (default: bench/out)",
    )
    p.add_argument(
        "--bridge-cmd",
        default=DEFAULT_BRIDGE_CMD,
        help="acp-bridge command line; {python} and {state_dir} are substituted",
    )
    p.add_argument(
        "--tests",
        default="startup,throughput,cancel_latency,memory",
        help="comma-separated subset of startup,throughput,cancel_latency,memory",
    )
    p.add_argument("--startup-spawns", type=int, help="timed spawns per agent (default 15)")
    p.add_argument("--throughput-reps", type=int, help="throughput runs per agent (default 5)")
    p.add_argument("--window", type=float, help="throughput window in seconds (default 2)")
    p.add_argument(
        "--coalesce-ms",
        type=float,
        help="longest throughput-client pause after a small read (default 2, 0 = off)",
    )
    p.add_argument("--cancel-rounds", type=int, help="cancel rounds per agent (default 200)")
    p.add_argument("--sessions", type=int, help="sessions in the memory test (default 200)")
    p.add_argument("--memory-reps", type=int, help="memory runs per agent (default 3)")
    p.add_argument(
        "--timeout", type=float, help="seconds to wait for any expected output (default 30)"
    )
    return p.parse_args(argv)


def make_config(args: argparse.Namespace) -> Config:
    cfg = Config.quick() if args.quick else Config()
    overrides = {
        "startup_spawns": args.startup_spawns,
        "throughput_reps": args.throughput_reps,
        "window_s": args.window,
        "coalesce_ms": args.coalesce_ms,
        "cancel_rounds": args.cancel_rounds,
        "sessions": args.sessions,
        "memory_reps": args.memory_reps,
        "timeout_s": args.timeout,
    }
    return replace(cfg, **{k: v for k, v in overrides.items() if v is not None})


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = make_config(args)
    commands = {BRIDGE: args.bridge_cmd, **REFERENCE_CMDS}
    names = [n.strip() for n in args.agents.split(",") if n.strip()]
    unknown = [n for n in names if n not in commands]
    if unknown or not names:
        log(f"unknown agent(s) {unknown}; choose from {', '.join(ALL_AGENTS)}")
        return 2
    tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    valid_tests = ("startup", "throughput", "cancel_latency", "memory")
    if any(t not in valid_tests for t in tests):
        log(f"unknown test in {tests}; choose from {', '.join(valid_tests)}")
        return 2
    specs = [AgentSpec(n, commands[n]) for n in names]
    out_dir: Path = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out_dir / "logs", ignore_errors=True)

    meta: Message = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "agents": names,
        "tests": tests,
        "commands": {s.name: s.command for s in specs},
    }
    bench = Bench(specs, cfg, out_dir)
    t0 = now()
    bench.run(tests)
    meta["duration_s"] = round(now() - t0, 1)

    markdown = render_markdown(bench, meta)
    (out_dir / "results.md").write_text(markdown)
    (out_dir / "results.json").write_bytes(to_json(bench, meta))
    print(markdown, end="")
    log(write_png(out_dir / "results.png", bench))
    log(f"results: {out_dir / 'results.md'}, {out_dir / 'results.json'} ({meta['duration_s']} s)")
    failed = any(r.errors for r in bench.results.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
