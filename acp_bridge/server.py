"""Serving ACP on stdio: wiring the connection, the agent and the writer."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

import anyio
import anyio.to_thread

from .acp.agent import Agent
from .errors import StartupFailed
from .jsonrpc.connection import Connection, RequestHandler, current_reply
from .log.writer.files import save_unwritten
from .loop.turn import TurnConfig
from .providers.base import Provider
from .stderr_log import MUST_DELIVER
from .transport.outbox import Outbox
from .transport.stdio import InputPoll, read_fd

__all__ = ["ServeOptions", "StartupError", "serve"]

log = logging.getLogger("acp_bridge.server")

# How long the provider's loading waits for ``initialize`` to be answered
# before it starts anyway (a client that sends something else first).
LOAD_AFTER_INITIALIZE_S = 0.25


# The exit status when records could not be written to their session log.
EXIT_RECORDS_LOST = 3


class StartupError(Exception):
    """Configuration that cannot work (a bad script, say).

    The server does not exit on it: ``initialize`` is answered as usual, and
    every ``session/new`` is answered with an error whose message is this
    exception's text (for a script: the file and the JSON path of the
    problem), so the editor shows the reason instead of a crashed agent.  The
    reason also goes to stderr once, and when the editor leaves the process
    exits with status 2.
    """


@dataclass(frozen=True, slots=True)
class ServeOptions:
    state_dir: str
    # Called once in a worker thread while the server already answers
    # ``initialize`` (loading and validating a script costs more than the
    # whole rest of start-up); returns the factory of per-session providers.
    # Raising `StartupError` makes every session/new fail with its message
    # and the exit status 2 (see `StartupError`).
    load_provider: Callable[[], Callable[[], Provider]]
    turn: TurnConfig = field(default_factory=TurnConfig)
    stdin_fd: int = 0
    stdout_fd: int = 1
    # Signals can only be watched from the main thread; in-process tests
    # that serve on pipes from another thread turn this off.
    handle_signals: bool = True
    # A turn abandoned at the cancel deadline may never return (a wedged
    # provider); at exit the process then leaves without waiting for it,
    # once everything it owes is written.  In-process users turn this off.
    exit_when_stuck: bool = True
    # Removes stored credentials (blocking; run in a worker thread) and
    # returns what it removed; when set, ``logout`` is advertised.
    forget_credentials: Callable[[], list[str]] | None = None
    # The command that runs ``acp-bridge setup``; when set, the ``terminal``
    # auth method is offered to clients that can run one.
    setup_command: tuple[str, ...] | None = None
    # How long a session's opening waits for its MCP servers (--mcp-start-timeout),
    # and the config file that may list more servers.
    mcp_start_timeout: float = 10.0
    mcp_config_file: str | None = None
    # The latest ACP version a client may ask for (--protocol).
    latest_protocol: int = 2


def _refuse_sessions(reason: str) -> Callable[[], Provider]:
    """A provider factory that answers every ``session/new`` with ``reason``."""
    if len(reason) > 2000:
        reason = reason[:1999] + "…"

    def refuse() -> Provider:
        raise StartupFailed(reason)

    return refuse


async def serve(options: ServeOptions) -> int:
    # Everything loaded so far lives as long as the process: keep it out of
    # the collector's full passes, which otherwise stall a stream now and then.
    gc.freeze()
    outbox = Outbox(options.stdout_fd)
    conn = Connection(outbox)
    ended = anyio.Event()
    why: list[str] = []
    status = 0
    # Set once ``initialize`` is answered, or when the editor leaves first.
    may_load = anyio.Event()

    def end(reason: str) -> None:
        if not ended.is_set():
            why.append(reason)
            ended.set()
            may_load.set()

    def on_stdin(data: bytes) -> None:
        if ended.is_set():
            return  # shutting down: nothing new is started
        if data:
            conn.feed(data)
        else:
            conn.fail_pending("stdin closed")
            end("stdin closed")

    async def watch_stdout() -> None:
        await outbox.stdout_broken.wait()
        conn.fail_pending("stdout closed")
        end("stdout closed")

    async def load_provider(agent: Agent) -> None:
        nonlocal status
        # The interpreter is ``initialize``'s alone until it is answered: a
        # worker thread importing the provider meanwhile would share the GIL
        # with it.  A session/new waits for the provider in any case.  Shielded:
        # a configuration that cannot work is reported (status 2) even when the
        # editor leaves at once.
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(LOAD_AFTER_INITIALIZE_S):
                await may_load.wait()
            if not await _load_provider(options, agent, again=False):
                status = 2

    async def watch_signals() -> None:
        # SIGHUP: the terminal or the parent went away, a disconnect like the others.
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                end(signal.Signals(signum).name)
                return

    poll_input = InputPoll()
    outbox.poll_input = poll_input
    # The request handlers (and the turns of the prompts) are tasks of the group.
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        agent = Agent(
            conn,
            outbox,
            state_dir=options.state_dir,
            config=options.turn,
            spawn=tg.start_soon,
            latest_protocol=options.latest_protocol,
        )
        agent.providers.reload = functools.partial(_load_provider, options, agent, again=True)
        agent.auth.forget = options.forget_credentials
        agent.auth.setup_command = options.setup_command
        agent.table.mcp.start_timeout = options.mcp_start_timeout
        agent.table.mcp.config_file = options.mcp_config_file
        conn.requests["initialize"] = _then(conn.requests["initialize"], outbox, may_load)
        tg.start_soon(outbox.run)
        tg.start_soon(load_provider, agent)
        tg.start_soon(watch_stdout)
        if options.handle_signals:
            tg.start_soon(watch_signals)
        tg.start_soon(read_fd, options.stdin_fd, on_stdin, outbox, poll_input)
        await ended.wait()
        log.info("shutting down: %s", why[0])
        # A disconnect is not a user stop: running turns are recorded as
        # disconnected, then every queued byte is written before we exit.
        with anyio.move_on_after(options.turn.cancel_deadline + 1):
            await agent.table.shutdown("disconnected")
            await conn.wait_answered()  # let the prompt handlers queue their answers
        conn.close()
        outbox.close()
        with anyio.move_on_after(2):
            await outbox.drain()
        # An editor that stopped reading must not keep us (or our records) hostage.
        outbox.give_up_stdout()
        with anyio.move_on_after(2):
            await outbox.finished.wait()
        if report_unwritten(outbox) and status == 0:
            status = EXIT_RECORDS_LOST
        stuck = agent.table.stuck_turns()
        if stuck and options.exit_when_stuck:
            log.warning("%d abandoned turn(s) still running; exiting without them", stuck)
            agent.table.mcp.kill_now()
            for session in agent.table.sessions.values():
                with contextlib.suppress(OSError):
                    session.log.file.fsync()
            logging.shutdown()  # write what is queued for stderr (bounded wait)
            os._exit(status)
        tg.cancel_scope.cancel()
    return status


def _then(initialize: RequestHandler, outbox: Outbox, done: anyio.Event) -> RequestHandler:
    """``initialize``, whose answer is written at once, then ``done`` is set."""

    async def answer_then(params: dict[str, Any]) -> Any:
        try:
            result = await initialize(params)
            current_reply.get().result(result)  # the later reply of the same result is dropped
            outbox.flush_now()
            return result
        finally:
            done.set()

    return answer_then


async def _load_provider(options: ServeOptions, agent: Agent, *, again: bool) -> bool:
    """Give ``agent`` its provider factory; False if the configuration cannot work.

    Raising `AuthRequired` is not a failure: sessions get ``-32000`` and its
    message, and each one loads the configuration again (see `acp_bridge.acp.auth`).
    """
    try:
        factory = await anyio.to_thread.run_sync(_load_in_worker, options.load_provider)
    except _auth_required() as exc:
        if not again:
            log.warning("no model provider can start yet: %s", exc)
        agent.providers.needs_auth(str(exc))
        return True
    except StartupError as exc:
        log.error("cannot start the provider: %s", exc)
        agent.providers.set_factory(_refuse_sessions(str(exc)))
        return False
    agent.providers.set_factory(factory)
    return True


def _auth_required() -> type[Exception]:
    """`AuthRequired`, if its module is loaded: only the choice of a provider
    raises it, and the scripted provider never loads that module."""
    choose = sys.modules.get("acp_bridge.providers.choose")
    return choose.AuthRequired if choose is not None else _NeverRaised


class _NeverRaised(Exception):
    pass


def _load_in_worker(
    load_provider: Callable[[], Callable[[], Provider]],
) -> Callable[[], Provider]:
    """In a worker thread while ``initialize`` is answered: the provider, and
    what ``session/new`` needs of the tools and the context, so that the first
    ``session/new`` finds them ready.  What only a turn needs (the tools'
    pydantic models, the runner, the script's models) loads at the first turn."""
    import_module("acp_bridge.acp.tool_setup")
    import_module("acp_bridge.context.state")  # the system prompt, made at session/new
    return load_provider()


def report_unwritten(outbox: Outbox) -> bool:
    """Say on stderr which records never reached their log and where a copy went."""
    lost = outbox.unwritten_logs()
    for log_file in lost:
        # Through the logging handler, which never blocks on a full stderr;
        # never dropped for its size (the records may follow in the message).
        log.error(save_unwritten(log_file), extra={MUST_DELIVER: True})
    return bool(lost)
