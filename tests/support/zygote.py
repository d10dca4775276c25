"""Bridges forked from one process that imported the bridge once.

A test suite that starts hundreds of bridges spends most of its CPU on the
interpreter's start-up and the bridge's imports (about half a second each on
two cores).  The zygote pays them once: run as a script, it imports what a
bridge imports, then waits on a Unix socket.  Each request (one datagram on a
``SOCK_SEQPACKET`` connection) carries the bridge's arguments, environment,
working directory and umask as JSON and three descriptors, its stdin, stdout
and stderr.  The zygote forks a child that puts those on 0, 1 and 2, sets the
environment, the directory and the umask, and runs ``acp-bridge ARGS`` as
``python -m acp_bridge`` would (`acp_bridge.cli.main`, then the interpreter's
normal exit: threads joined, ``atexit``, flushed streams).  The zygote
answers the child's pid, then, when the child ends, its exit status in
`subprocess`'s convention (``-N`` for signal N), and closes the connection.

The child is a real process on the test's own pipes: the test signals it,
pauses its stdout, kills it, reads its log files, exactly as with a fresh
``python -m acp_bridge``.  What differs is only what the interpreter does
before ``main``: what is imported and when.  So `fork_allowed` refuses (and
the caller spawns a fresh interpreter) whenever the environment asks for
something the interpreter reads at start-up (a ``PYTHON*`` variable that is
not the zygote's).  Tests of the start-up itself pass their own ``command``,
which never comes here.

The client side, `Zygote`, is what `support.bridge.start_bridge` uses: one per
test session, started on first use, stopped when its stdin (a pipe from the
test process) reaches EOF, which kills any child still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio

from acp_bridge.agent_process import AgentProcess, agent_on_pipes

__all__ = ["ENV_SPAWN", "ForkedProcess", "Zygote", "fork_agent", "fork_allowed", "use_zygote"]

# ``ACP_BRIDGE_TEST_SPAWN=fresh`` (or ``pytest --spawn fresh``) starts every
# bridge as a new interpreter, as before the zygote.
ENV_SPAWN = "ACP_BRIDGE_TEST_SPAWN"

# The request's JSON and its descriptors fit in one datagram.
MAX_REQUEST = 1 << 20


# PYTHON* variables that are not the interpreter's (a library reads them when it
# runs), and PYTHONPATH, which the child applies to its own sys.path.
NOT_READ_AT_START = frozenset({"PYTHONPATH", "PYTHON_KEYRING_BACKEND"})


def fork_allowed(env: dict[str, str] | None) -> bool:
    """Whether a bridge with this environment can be forked from the zygote
    (which has the test process's environment): no ``PYTHON*`` variable that
    the interpreter reads before any code runs may differ."""
    if env is None:
        return True
    python_vars = {k for k in (*env, *os.environ) if k.startswith("PYTHON")}
    return all(env.get(k) == os.environ.get(k) for k in python_vars - NOT_READ_AT_START)


def _path_entries(env: dict[str, str] | os._Environ[str]) -> list[str]:
    return [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]


def use_zygote(env: dict[str, str] | None, stderr: object) -> bool:
    """Whether `support.bridge.start_bridge` forks this bridge (else it spawns one)."""
    if os.environ.get(ENV_SPAWN, "fork") == "fresh":
        return False
    return fork_allowed(env) and stderr != subprocess.PIPE


# --- the client side (in the test process) ----------------------------------


@dataclass
class ForkedProcess:
    """A bridge forked by the zygote: an `acp_bridge.agent_process.ChildProcess`.

    The zygote is its parent: it reaps the child when it ends and sends the
    exit status on this process's own connection, which ``wait`` reads.  Until
    the child ends its pid is its own, so a signal reaches it; after, a signal
    finds no process and is dropped.
    """

    pid: int
    conn: socket.socket
    returncode: int | None = None

    def send_signal(self, signum: signal.Signals, /) -> None:
        if self.returncode is None:
            # Gone already (the zygote reaped it, its status not read yet):
            # nothing to signal, as with `subprocess.Popen.send_signal`.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        if self.returncode is None:
            word, status = await _message(self.conn)
            if word != "exit":
                raise RuntimeError(f"the zygote said {word} {status} for pid {self.pid}")
            self.returncode = int(status)
        return self.returncode

    async def aclose(self) -> None:
        if self.returncode is None:
            self.kill()
            with anyio.CancelScope(shield=True):
                await self.wait()
        self.conn.close()


async def _message(conn: socket.socket) -> tuple[str, str]:
    """The zygote's next message on ``conn`` (non-blocking): two words."""
    while True:
        await anyio.wait_readable(conn)
        try:
            data = conn.recv(64)
        except BlockingIOError:
            continue
        if not data:
            raise RuntimeError("the zygote closed the connection")
        word, value = data.decode().split()
        return word, value


class Zygote:
    """The test process's handle on one zygote (started on the first `fork`)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._path = ""
        self._lock = threading.Lock()

    def _ensure(self) -> str:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._dir = tempfile.TemporaryDirectory(prefix="bridge-zygote-")
                self._path = os.path.join(self._dir.name, "socket")
                self._process = subprocess.Popen(
                    [sys.executable, __file__, self._path],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    close_fds=True,
                )
                assert self._process.stdout is not None
                ready = self._process.stdout.readline()
                if ready.strip() != b"ready":
                    raise RuntimeError(f"the bridge zygote did not start: {ready!r}")
            return self._path

    async def fork(
        self,
        args: list[str],
        *,
        stdin: int,
        stdout: int,
        stderr: int,
        env: dict[str, str] | None,
        cwd: str | Path | None,
        umask: int,
    ) -> ForkedProcess:
        """Fork a bridge on these descriptors (the caller closes its copies)."""
        path = await anyio.to_thread.run_sync(self._ensure)
        request = {
            "args": args,
            "env": dict(os.environ) if env is None else env,
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "umask": umask,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(path)
            socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
            conn.setblocking(False)
            word, pid = await _message(conn)
            if word != "pid":
                raise RuntimeError(f"the bridge zygote could not fork: {word} {pid}")
        except BaseException:
            conn.close()
            raise
        return ForkedProcess(int(pid), conn)

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                assert self._process.stdin is not None
                self._process.stdin.close()
                self._process.wait(timeout=30)
                if self._process.stdout is not None:
                    self._process.stdout.close()
                self._process = None
            if self._dir is not None:
                self._dir.cleanup()
                self._dir = None


_ZYGOTE = Zygote()


async def fork_agent(
    args: list[str],
    *,
    env: dict[str, str] | None,
    stderr: int | IO[Any] | Path | None,
    paused: bool,
    cwd: str | Path | None,
    umask: int = -1,
) -> AgentProcess:
    """``acp-bridge ARGS`` forked from this test session's zygote, on raw pipes
    (`acp_bridge.agent_process.agent_on_pipes`), as `open_agent` would run it."""

    async def start(stdin: int, stdout: int, err: int | IO[Any] | None) -> ForkedProcess:
        devnull = -1
        if err is None:
            err_fd = 2
        elif err == subprocess.DEVNULL:
            err_fd = devnull = os.open(os.devnull, os.O_WRONLY)
        elif isinstance(err, int):
            err_fd = err
        else:
            err_fd = err.fileno()
        try:
            return await _ZYGOTE.fork(
                args, stdin=stdin, stdout=stdout, stderr=err_fd, env=env, cwd=cwd, umask=umask
            )
        finally:
            if devnull != -1:
                os.close(devnull)

    return await agent_on_pipes(start, stderr=stderr, paused=paused)


def close() -> None:
    """Stop this test session's zygote (its children are gone by then)."""
    _ZYGOTE.close()


# --- the zygote (run as a script) ------------------------------------------


def _preload() -> None:
    """Import what a bridge imports, before any fork (no thread may run then)."""
    import pydantic.json_schema  # noqa: F401

    # What a first turn loads (pydantic's models and schemas): every child has it.
    from acp_bridge.mcp import link
    from acp_bridge.tools.registry import TOOLS

    for tool in TOOLS:
        tool.args_model.model_json_schema()
    link.import_client()
    if threading.active_count() != 1:
        raise RuntimeError(f"threads still run after the imports: {threading.enumerate()}")


@dataclass
class _Child:
    pid: int
    pidfd: int
    conn: socket.socket


def _serve(path: str) -> dict[str, Any] | None:
    """The zygote's loop.  Returns in a forked child only (its request);
    returns None in the zygote once the test process is gone."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    children: dict[int, _Child] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    for child in children.values():
                        signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
                        os.waitpid(child.pid, 0)
                    return None
            elif key.data == "accept":
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
                if not message or len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for child in children.values():
                        os.close(child.pidfd)
                        child.conn.close()
                    conn.close()
                    return _become_child(json.loads(message), fds)
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = _Child(pid, pidfd, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                conn.send(f"pid {pid}".encode())
            else:
                child = children.pop(key.fd)
                selector.unregister(key.fd)
                _, status = os.waitpid(child.pid, 0)
                os.close(child.pidfd)
                with contextlib.suppress(OSError):  # the test may be gone already
                    child.conn.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
                child.conn.close()


def _become_child(request: dict[str, Any], fds: list[int]) -> dict[str, Any]:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    # sys.path as ``python -m`` would start it: the working directory, then
    # PYTHONPATH, then the interpreter's own entries.
    own = sys.path[1 + len(_path_entries(os.environ)) :]
    sys.path[:] = [request["cwd"], *_path_entries(request["env"]), *own]
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request["umask"] != -1:
        os.umask(request["umask"])
    return request


def _main() -> None:
    _preload()
    request = _serve(sys.argv[1])
    if request is None:
        return
    import acp_bridge
    from acp_bridge.cli import main

    # What ``python -m acp_bridge`` puts in argv[0]: the path of __main__.py.
    assert acp_bridge.__file__ is not None
    sys.argv = [os.path.join(os.path.dirname(acp_bridge.__file__), "__main__.py"), *request["args"]]
    raise SystemExit(main(request["args"]))


if __name__ == "__main__":
    _main()
