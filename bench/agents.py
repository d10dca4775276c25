"""The agents under test and one agent subprocess driven over pipes.

Every agent is spawned the same way (the benchmark's interpreter, the repository root as
cwd, stdin/stdout pipes, stderr to a log file) and driven by `AgentProcess`: raw
``select`` + ``os.read`` on stdout, lines classified into a `LineStats`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from bench.procfs import dir_usage, tree_rss_kib
from bench.wire import LineStats, Message

REPO_ROOT = Path(__file__).resolve().parent.parent
now = time.perf_counter

BRIDGE, SDK, RAW = "acp-bridge", "ref-sdk", "ref-raw"
ALL_AGENTS = (BRIDGE, SDK, RAW)
DEFAULT_BRIDGE_CMD = (
    "{python} -m acp_bridge --provider fake --script {script} --state-dir {state_dir}"
)
REFERENCE_CMDS = {
    SDK: "{python} bench/ref_sdk_agent.py",
    RAW: "{python} bench/ref_raw_agent.py",
}
CLIENT_INFO = {"name": "acp-bench", "version": "0.1.0"}
PING_METHOD = "_acp_bench/ping"  # any answer (result or error) will do: it is a sync point
READ_SIZE = 1 << 20
COALESCE_BELOW = 16 << 10
SCRUBBED_ENV = ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Mode:
    """What every prompt gets: an endless stream (until cancelled) or a one-line answer.

    ``script`` replaces ``{script}`` in the command (the bridge's scripted provider);
    ``ref_args`` are appended to a reference agent's command.
    """

    name: str
    script: Path
    ref_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class AgentSpec:
    """An agent command line; ``{python}``, ``{state_dir}`` and ``{script}`` are
    substituted at spawn."""

    name: str
    command: str

    @property
    def uses_state_dir(self) -> bool:
        return "{state_dir}" in self.command

    @property
    def is_reference(self) -> bool:
        return self.name in REFERENCE_CMDS and self.command == REFERENCE_CMDS[self.name]

    def supports(self, mode: Mode) -> bool:
        """Whether the command can be put in ``mode`` (the endless mode is the default)."""
        return mode.name == "endless" or self.is_reference or "{script}" in self.command

    def argv(self, state_dir: Path | None, mode: Mode) -> list[str]:
        subs = {
            "{python}": sys.executable,
            "{state_dir}": str(state_dir),
            "{script}": str(mode.script),
        }
        out = []
        for arg in shlex.split(self.command):
            for key, value in subs.items():
                arg = arg.replace(key, value)
            out.append(arg)
        if self.is_reference:
            out += mode.ref_args
        return out


class AgentError(RuntimeError):
    """The agent misbehaved badly enough that the current measurement is abandoned."""


class AgentProcess:
    """One agent subprocess driven over pipes."""

    def __init__(
        self,
        spec: AgentSpec,
        mode: Mode,
        log_dir: Path,
        env: dict[str, str],
        timeout_s: float,
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
                spec.argv(self.state_dir, mode),
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

    def _read(self, deadline: float, timeout_ok: bool, size: int) -> bytes | None:
        remaining = deadline - now()
        if remaining <= 0 or not select.select([self.rfd], [], [], remaining)[0]:
            if timeout_ok:
                return None
            raise self.error("timed out waiting for output")
        data = os.read(self.rfd, size)
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
        read_size: int = READ_SIZE,
        pace_s: float = 0.0,
    ) -> None:
        """Read and classify output into ``stats`` until ``stop(stats)`` or the deadline.

        ``coalesce_s`` > 0: after a small read, pause (at most that long) so that the next
        read gets a bigger batch: fewer client wake-ups competing with the agent for the
        CPUs.  The pause is capped so that, at the rate seen so far, the agent fills at most
        a quarter of the pipe meanwhile: the agent never blocks on a full pipe.

        ``pace_s`` > 0 and a small ``read_size``: a client that reads at its own pace,
        at most ``read_size`` bytes every ``pace_s`` seconds (an editor busy rendering).
        """
        # The agent may have resized the pipe since it started (acp-bridge makes
        # its stdout pipe smaller): the pause's cap must use the size it has now.
        self.pipe_size = pipe_size(self.rfd)
        small = min(COALESCE_BELOW, self.pipe_size // 2)
        while not stop(stats):
            if pace_s:
                time.sleep(pace_s)
            data = self._read(deadline, timeout_ok, read_size)
            if data is None:
                return
            if coalesce_s and len(data) < small:
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

    @staticmethod
    def session_new_params() -> Message:
        return {"cwd": str(REPO_ROOT), "mcpServers": []}

    def check_session_new(self, resp: Message) -> str:
        result = resp.get("result")
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str) or not sid:
            raise self.error(f"session/new without sessionId: {str(resp)[:300]}")
        return sid

    def new_session(self) -> str:
        return self.check_session_new(self.request("session/new", self.session_new_params()))

    def start_prompt(self, session_id: str, text: str = "stream tokens until cancelled") -> int:
        prompt = [{"type": "text", "text": text}]
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
