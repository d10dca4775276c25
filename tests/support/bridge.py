"""The one way a test starts a bridge: `start_bridge`, and `barrier`.

`start_bridge` runs ``acp-bridge`` in one of two modes and yields the editor's
side, an `acp_bridge.client.AcpClient`, with its read loop running:

- ``"subprocess"`` (the default): the real command on raw pipes
  (`acp_bridge.client.running`), with the bridge's own options, environment,
  working directory and stderr; ``client.agent`` is the process (``pid``,
  ``send_signal``, ``wait``, ``stdout.pause()``).  On the way out the bridge is
  killed if it still runs: use ``client.finish()`` in the body to end it as an
  editor does and get its exit status.
- ``"inprocess"``: `acp_bridge.server.serve` in this process on two
  ``os.pipe`` pairs, no interpreter start-up; scripted provider only, no extra
  options.  On the way out stdin is closed and stdout read to EOF.

A subprocess bridge is forked from a process that imported the bridge once
(`support.zygote`, with `running_bridge`) unless ``--spawn fresh`` is given or
its environment needs a fresh interpreter; a ``command`` of its own is always
spawned.

The pytest fixture ``bridge`` (``tests/conftest.py``) calls it with the test's
``tmp_path``; a test runs in both modes with
``@pytest.mark.parametrize("bridge_mode", MODES)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO, Any, Literal

import anyio

from acp_bridge.client import BARRIER_METHOD, AcpClient, attached, bridge_command, running
from acp_bridge.loop.turn import TurnConfig
from acp_bridge.providers.base import Provider
from support import zygote

Mode = Literal["subprocess", "inprocess"]
MODES: tuple[Mode, ...] = ("subprocess", "inprocess")
# What the ``bridge`` fixture is: `start_bridge` with the state directory (and
# stderr) in the test's ``tmp_path``: ``async with bridge(*options, script=path)``.
BridgeStarter = Callable[..., AbstractAsyncContextManager[AcpClient]]


def bridge_args(
    state_dir: Path | str, *extra: str, script: Path | None = None, provider: str | None = "fake"
) -> tuple[str, ...]:
    """The command-line options of a test bridge."""
    options: tuple[str, ...] = ("--provider", provider) if provider else ()
    if script is not None:
        options += ("--script", str(script))
    return (*options, "--state-dir", str(state_dir), *extra)


@asynccontextmanager
async def start_bridge(
    state_dir: Path | str,
    *extra: str,
    script: Path | None = None,
    provider: str | None = "fake",
    mode: Mode = "subprocess",
    command: Sequence[str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    env: dict[str, str] | None = None,
    paused: bool = False,
    keep: bool = True,
    cwd: str | Path | None = None,
) -> AsyncIterator[AcpClient]:
    """A bridge on ``script`` with its state in ``state_dir`` (see the module docstring).

    ``extra`` are further options; ``command`` replaces ``python -m acp_bridge``
    (a built binary, say); ``provider=None`` passes no ``--provider``.
    """
    if mode == "subprocess":
        args = bridge_args(state_dir, *extra, script=script, provider=provider)
        argv = [*command, *args] if command else bridge_command(*args)
        async with running_bridge(
            argv, env=env, stderr=stderr, paused=paused, keep=keep, cwd=cwd
        ) as client:
            yield client
        return
    if mode != "inprocess":
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    unsupported = {
        "command": command,
        "stderr": stderr,
        "env": env,
        "paused": paused,
        "cwd": cwd,
        "another provider": provider != "fake",
        "no script": script is None,
    }
    if any(unsupported.values()):
        wrong = ", ".join(name for name, value in unsupported.items() if value)
        raise ValueError(f"the in-process bridge takes a script and nothing else ({wrong})")
    # Imported here: most tests never serve in-process.
    from support.pipe_peer import bridge_on_pipes

    assert script is not None
    turn, load_provider = _inprocess_options(state_dir, extra, script)
    parsed = json.loads(await anyio.Path(script).read_text())
    from acp_bridge import serve_cli

    # What `serve_cli.serve_command` adds: logout and the setup command.
    command_line = {
        "forget_credentials": serve_cli._forget_credentials,
        "setup_command": serve_cli.setup_command(),
    }
    async with bridge_on_pipes(
        parsed,
        str(state_dir),
        keep=keep,
        turn=turn,
        load_provider=load_provider,
        command_line=command_line,
    ) as served:
        yield served.client


@asynccontextmanager
async def running_bridge(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    stderr: int | IO[Any] | Path | None = None,
    umask: int = -1,
    paused: bool = False,
    keep: bool = True,
    cwd: str | Path | None = None,
) -> AsyncIterator[AcpClient]:
    """`acp_bridge.client.running` for the tests: ``python -m acp_bridge ARGS``
    (`bridge_command`) is forked from the test session's zygote
    (`support.zygote`) when nothing in its environment needs a fresh
    interpreter; any other command, or ``--spawn fresh``, is spawned."""
    prefix = bridge_command()
    if list(command[: len(prefix)]) == prefix and zygote.use_zygote(env, stderr):
        agent = await zygote.fork_agent(
            list(command[len(prefix) :]),
            env=env,
            stderr=stderr,
            paused=paused,
            cwd=cwd,
            umask=umask,
        )
        async with attached(agent, keep=keep) as client:
            yield client
        return
    async with running(
        command, env=env, stderr=stderr, umask=umask, paused=paused, keep=keep, cwd=cwd
    ) as client:
        yield client


# What the in-process bridge takes from the command line: the turn's bounds and
# the scripted provider's context settings; any other option is the process's.
INPROCESS_OPTIONS = frozenset(
    {
        "provider",
        "script",
        "state_dir",
        "cancel_deadline",
        "idle_timeout",
        "max_steps",
        "tool_timeout",
        "pass_env",
        "system",
        "system_mode",
        "compact_threshold",
        "context_window",
    }
)


def _inprocess_options(
    state_dir: Path | str, extra: Sequence[str], script: Path
) -> tuple[TurnConfig, Callable[[], Callable[[], Provider]]]:
    """The turn settings and provider loader ``acp-bridge`` would build from these
    options (parsed by its own parser, built as `serve_cli.serve_command` does)."""
    from acp_bridge import serve_cli
    from acp_bridge.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(bridge_args(state_dir, *extra, script=script))
    defaults = vars(parser.parse_args([]))
    other = sorted(
        f"--{name.replace('_', '-')}"
        for name, value in vars(args).items()
        if name not in INPROCESS_OPTIONS and value != defaults.get(name)
    )
    if other:
        raise ValueError(f"extra options the in-process bridge cannot take: {', '.join(other)}")
    turn = TurnConfig(
        max_steps=args.max_steps,
        cancel_deadline=args.cancel_deadline,
        idle_timeout=args.idle_timeout or None,
        tool_timeout=args.tool_timeout,
        pass_env=serve_cli._pass_env(args.pass_env),
    )
    flags = serve_cli._flags(args)
    return turn, lambda: serve_cli._load_fake_provider(args.script, flags, args)


async def barrier(client: AcpClient, *, within: float = 30) -> None:
    """Return once the bridge has answered a cheap request sent now
    (`AcpClient.barrier`).

    The bridge writes in order, so everything it wrote before it read this
    request has been received when this returns: a test that must see that
    something did NOT happen (no late update, no second response) looks after
    a barrier, never after a sleep.  The request and its answer leave no trace
    in the client's transcript, messages or responses, so snapshots of the
    transcript do not see it.
    """
    await client.barrier(within=within)


__all__ = [
    "BARRIER_METHOD",
    "MODES",
    "BridgeStarter",
    "Mode",
    "barrier",
    "bridge_args",
    "running_bridge",
    "start_bridge",
]


def size_limited_env() -> dict[str, str]:
    """The environment of a bridge whose file size a test limits (``RLIMIT_FSIZE``):
    no bytecode written, which the limit would cut short (a module first
    imported then would leave a truncated ``.pyc`` that every later
    interpreter fails to load).  A ``PYTHON*`` variable: a fresh interpreter."""
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
