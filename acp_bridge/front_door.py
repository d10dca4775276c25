"""The start-up's front door: ``initialize`` and the first ``session/new``,
answered before the server is imported.

An editor spawns the agent, sends ``initialize``, then ``session/new``, and
the user can type once ``session/new`` is answered.  Importing the event loop
(asyncio and anyio) costs more than twice what a minimal agent needs for
both answers, so `run` answers them itself, synchronously, with nothing but
the standard library and orjson: it reads stdin with ``os.read`` and writes
whole lines to stdout with blocking ``os.write``.

* ``initialize`` with well-formed params gets the server's own answer
  (`acp_bridge.acp.answers.initialize_answer`); its client capabilities and
  client info are kept for the server.
* ``session/new`` that needs nothing heavy (no MCP server, from the editor or
  the config file; a working directory that exists; a provider whose quick
  check passes, `Door.provider`) is made here as the server makes it: its log
  file (private, locked), the same ``session/start`` record
  (`acp_bridge.log.record_line`), written before the answer, and the same
  answer (`acp_bridge.acp.answers.session_fields`).
* Anything else (another method, a notification, a frame that is not a
  request, params the server would refuse, stdin's end, a signal, a second
  ``initialize``, nothing to read for `IDLE_S`) ends the front door without
  taking that message, and so does a session answered: `run` returns a
  `HandOff`, the bytes it read but did not handle, what ``initialize`` said
  and the sessions it opened, and the server (`acp_bridge.server.serve`)
  starts from there: it handles those bytes first and adopts the sessions
  (`acp_bridge.acp.live.LiveMethods.adopt`).

Nothing it writes can interleave with the server's output: the server's writer
does not exist before `run` returns.  ``ACP_BRIDGE_FRONT_DOOR=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .acp import answers
from .acp import params as P
from .commands.catalog import commands_update
from .jsonrpc.errors import RpcError
from .jsonrpc.framing import DEFAULT_MAX_FRAME
from .jsonrpc.messages import Request, encode_result, parse_frame
from .log.lock import lock_log, unlock_log
from .log.reader import session_path
from .log.record_line import encode_record, new_record
from .loop.updates import UpdateFrames
from .mcp.config_file import configured_entries
from .paths import create_private_file, make_private_dirs
from .tools.modes import DEFAULT_MODE
from .transport.pipe_size import STDOUT_PIPE_SIZE, shrink_pipe

__all__ = [
    "ENV_FRONT_DOOR",
    "ENV_FRONT_DOOR_IDLE",
    "ENV_FRONT_DOOR_REPORT",
    "Door",
    "HandOff",
    "OpenedSession",
    "QuickProvider",
    "enabled",
    "run",
]

log = logging.getLogger("acp_bridge.front_door")

# ``0`` (or ``off``, ``no``, ``false``) turns the front door off: the server
# answers from the first byte.
ENV_FRONT_DOOR: Final = "ACP_BRIDGE_FRONT_DOOR"
# A file the front door writes, as it hands off, what it answered, why it
# ended and the modules loaded at that moment (a JSON object; for tests).
ENV_FRONT_DOOR_REPORT: Final = "ACP_BRIDGE_FRONT_DOOR_REPORT"
# Seconds without input after which the server starts anyway (`IDLE_S`).
ENV_FRONT_DOOR_IDLE: Final = "ACP_BRIDGE_FRONT_DOOR_IDLE"

# With nothing more to read for this long, the server starts anyway (it loads
# the provider and the tools meanwhile).
IDLE_S: Final = 1.0
# A first line longer than this goes to the server unread (a real
# ``initialize`` or ``session/new`` is a few hundred bytes).
MAX_LINE: Final = min(1 << 20, DEFAULT_MAX_FRAME)
READ_SIZE: Final = 1 << 16
SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def enabled() -> bool:
    return os.environ.get(ENV_FRONT_DOOR, "1").strip().lower() not in ("0", "off", "no", "false")


@dataclass(frozen=True, slots=True)
class QuickProvider:
    """What a ``session/new`` answer and its record say of the provider."""

    name: str
    model_options: list[dict[str, Any]] | None = None
    # The configuration the answer was made from (a real provider's
    # `acp_bridge.providers.config.ProviderConfig`): should the server fail to
    # make the provider, the session keeps a stand-in with these models
    # (`acp_bridge.providers.unavailable`).
    config: Any = None


@dataclass(frozen=True, slots=True)
class Door:
    """What the front door needs to know of the server it stands in for."""

    state_dir: str
    # ``initialize``: whether ``logout`` is offered, and how setup is run.
    logout: bool
    setup_command: tuple[str, ...] | None
    # The config file whose ``[[mcp_servers]]`` every session gets.
    mcp_config_file: str | None
    # Called at the first ``session/new``: the provider, if it can certainly
    # start (its quick check passed), else None (the server decides).
    provider: Callable[[], QuickProvider | None]


@dataclass(eq=False, slots=True)
class OpenedSession:
    """A session the front door made: its log holds the ``session/start`` record."""

    session_id: str
    cwd: str
    extra_dirs: list[str] | None
    params: dict[str, Any]
    path: str
    # The descriptor that holds the log's lock until the server takes it.
    fd: int | None
    # What the answer said of the provider.
    provider: QuickProvider | None = None

    def release(self) -> None:
        """Give up the front door's lock and descriptor (the server locks the log next)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                unlock_log(fd)
            finally:
                os.close(fd)


@dataclass(eq=False, slots=True)
class HandOff:
    """Where the front door stopped: what the server starts from."""

    # Read from stdin and not handled: the server's connection takes these first.
    unread: bytes = b""
    # Whether ``initialize`` was answered, and what it said.
    initialized: bool = False
    client_capabilities: dict[str, Any] | None = None
    client_info: dict[str, Any] | None = None
    sessions: list[OpenedSession] = field(default_factory=list)
    # The methods answered, in order, and why the front door ended.
    answered: list[str] = field(default_factory=list)
    why: str = ""
    # SIGTERM, SIGINT or SIGHUP received since the front door started (the
    # server ends with the first, as if it had received it itself).
    signals: list[int] = field(default_factory=list)
    # The size of the stdout pipe before the front door made it small (0:
    # unchanged), for the server's writer (`acp_bridge.transport.pipe`).
    stdout_pipe_was: int = 0


class _Signalled(Exception):
    pass


class _Front:
    def __init__(self, door: Door, stdin_fd: int, stdout_fd: int) -> None:
        self.door = door
        self.stdin_fd = stdin_fd
        self.stdout_fd = stdout_fd
        self.state = HandOff()
        self.buf = bytearray()
        # Whether a signal may interrupt: only while waiting for input.
        self.waiting = False
        self.idle = _idle_seconds()

    # -- the loop ------------------------------------------------------------------

    def run(self) -> HandOff:
        state = self.state
        try:
            while not state.why:
                nl = self.buf.find(b"\n")
                if nl < 0:
                    self._read_more()
                    continue
                answer = self._answer(bytes(self.buf[:nl]))
                if answer is None:
                    state.why = "a message for the server"
                    break
                del self.buf[: nl + 1]
                self._write(answer)
                if state.sessions:
                    state.why = "session/new answered"
                elif state.signals:
                    state.why = "signal"
        except _Signalled:
            state.why = "signal"
        state.unread = bytes(self.buf)
        return state

    def _read_more(self) -> None:
        if len(self.buf) > MAX_LINE:
            self.state.why = "a long line"
            return
        self.waiting = True
        try:
            if self.state.signals:
                raise _Signalled
            ready, _, _ = select.select([self.stdin_fd], [], [], self.idle)
            if not ready:
                self.state.why = "idle"
                return
            data = os.read(self.stdin_fd, READ_SIZE)
        except BlockingIOError:
            return
        finally:
            self.waiting = False
        if not data:
            self.state.why = "stdin closed"  # the server reads the end again
            return
        self.buf += data

    def _write(self, data: bytes) -> None:
        """The whole answer, blocking (the server's writer does not exist yet)."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.stdout_fd, view) :]
            except BlockingIOError:
                select.select([], [self.stdout_fd], [])
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                # The editor is gone: the server finds stdout closed.
                self.state.why = "stdout closed"
                return

    # -- the messages ----------------------------------------------------------------

    def _answer(self, line: bytes) -> bytes | None:
        """The answer to ``line``, or None to leave it (and the rest) to the server."""
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return None
        msg = parse_frame(line)
        if not isinstance(msg, Request):
            return None
        result: dict[str, Any] | None
        try:
            if msg.method == "initialize" and not self.state.initialized:
                result = self._initialize(msg.params)
            elif msg.method == "session/new" and self.state.initialized:
                result = self._new_session(msg.params)
            else:
                return None
        except RpcError:
            return None  # the server answers it, with its own message
        except Exception:  # a bug here must not cost the editor its agent
            log.exception("start-up: %s left to the server", msg.method)
            return None
        if result is None:
            return None
        self.state.answered.append(msg.method)
        answer = encode_result(msg.id, result)
        if msg.method == "session/new":
            # The commands follow the answer at once, as the server announces them.
            session_id = result["sessionId"]
            answer += UpdateFrames(session_id).update(commands_update())
        return answer

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        capabilities, info = answers.read_initialize(params)
        door, state = self.door, self.state
        answer = answers.initialize_answer(
            capabilities, logout=door.logout, setup_command=door.setup_command
        )
        state.client_capabilities, state.client_info = capabilities, info
        state.initialized = True
        return answer

    def _new_session(self, params: dict[str, Any]) -> dict[str, Any] | None:
        # Checked as `acp_bridge.acp.live.LiveMethods.new_session` checks them;
        # whatever it would refuse is left to it (RpcError, None).
        cwd = P.absolute_path(params, "cwd")
        extra_dirs = P.additional_directories(params)
        if params.get("mcpServers") not in (None, []):
            return None
        if not os.path.isdir(cwd) or not _no_configured_servers(self.door.mcp_config_file):
            return None
        provider = self.door.provider()
        if provider is None:
            return None
        state = self.state
        session_id = answers.new_session_id()
        start = answers.session_start_fields(
            session_id, cwd, provider.name, extra_dirs, state.client_info, state.client_capabilities
        )
        opened = self._open_log(session_id, cwd, extra_dirs, params, start)
        if opened is None:
            return None
        opened.provider = provider
        state.sessions.append(opened)
        return {
            "sessionId": session_id,
            **answers.session_fields(provider.model_options, DEFAULT_MODE),
        }

    def _open_log(
        self,
        session_id: str,
        cwd: str,
        extra_dirs: list[str] | None,
        params: dict[str, Any],
        start: dict[str, Any],
    ) -> OpenedSession | None:
        """The session's log, created as the server creates it, its first record
        written; None if anything fails (the server tries again and says why)."""
        path = session_path(self.door.state_dir, session_id)
        try:
            make_private_dirs(os.path.dirname(path))
            create_private_file(path)
        except OSError:
            return None
        fd: int | None = None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            lock_log(fd, path)
            line = memoryview(encode_record(new_record(0, "session/start", 0, 0, start)))
            while line:
                line = line[os.write(fd, line) :]
        except OSError:
            if fd is not None:
                os.close(fd)
            _remove(path)
            return None
        return OpenedSession(session_id, cwd, extra_dirs, params, path, fd)

    # -- signals -------------------------------------------------------------------

    def on_signal(self, signum: int, frame: object) -> None:
        self.state.signals.append(signum)
        if self.waiting:
            raise _Signalled


def run(door: Door, *, stdin_fd: int = 0, stdout_fd: int = 1) -> HandOff:
    """Answer what the front door can (see the module); where it stopped.

    SIGTERM, SIGINT and SIGHUP are caught from here on and kept in
    `HandOff.signals` until the server watches them itself.
    """
    front = _Front(door, stdin_fd, stdout_fd)
    if threading.current_thread() is not threading.main_thread():
        front.state.why = "not the main thread"
        return front.state
    for signum in SIGNALS:
        signal.signal(signum, front.on_signal)
    # Made small from the start, as the server's writer makes it; the size it
    # had goes to the writer (`HandOff.stdout_pipe_was`: a replay gets it).
    front.state.stdout_pipe_was = shrink_pipe(stdout_fd, STDOUT_PIPE_SIZE)
    state = front.run()
    report = os.environ.get(ENV_FRONT_DOOR_REPORT)
    if report:
        _report(report, state)
    return state


def _idle_seconds() -> float:
    try:
        seconds = float(os.environ.get(ENV_FRONT_DOOR_IDLE, IDLE_S))
    except ValueError:
        return IDLE_S
    return seconds if 0 <= seconds <= 3600 else IDLE_S


def _no_configured_servers(path: str | None) -> bool:
    """Whether the config file lists no MCP server (as `acp_bridge.mcp.hub`
    reads it); a file that cannot be read is left to the server, which says why."""
    if path is None:
        return True
    try:
        return configured_entries(path) == []
    except (OSError, ValueError):  # tomllib.TOMLDecodeError is a ValueError
        return False


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _report(path: str, state: HandOff) -> None:
    report = {
        "answered": state.answered,
        "why": state.why,
        "unread": len(state.unread),
        "modules": sorted(sys.modules),
    }
    with open(path, "wb") as f:
        f.write(orjson.dumps(report))
