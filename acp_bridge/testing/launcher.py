"""Starting agents in a test's folders: what the ``acp_agent`` fixture gives a test.

    async with acp_agent.bridge(script="sessions/hello.json") as agent: ...
    async with acp_agent.bridge(config="providers.toml", profile="local") as agent: ...
    async with acp_agent.command(["my-agent", "--acp"]) as agent: ...
    async with acp_agent.start(script=...) as agent: ...   # the --acp-agent command if given

Each agent gets the test's workspace (``tmp_path/workspace``), acp-bridge's
state in ``tmp_path/state`` (the same for every start in one test, so a second
process can load the sessions of the first), and its stderr in a file of
``tmp_path`` (`Agent.stderr`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from itertools import count
from pathlib import Path

from ..client import bridge_command
from .agent import Agent, Runner, start_agent


class AgentLauncher:
    """Starts agents for one test (see the module docstring).

    ``bridge`` is the acp-bridge command line the options are added to (an
    agent built on acp-bridge runs its own script here); ``default`` is the
    command `start` runs instead of acp-bridge (the ``--acp-agent`` option);
    ``runner`` starts each command (`acp_bridge.testing.agent.Runner`).
    """

    def __init__(
        self,
        tmp: Path,
        *,
        workspace: Path | None = None,
        bridge: Sequence[str] | None = None,
        default: Sequence[str] | None = None,
        env: dict[str, str] | None = None,
        runner: Runner | None = None,
    ) -> None:
        self.tmp = tmp
        self.runner = runner
        self.workspace = workspace or tmp / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.bridge_command = list(bridge) if bridge else bridge_command()
        self.default = list(default) if default else None
        self.env = env
        self.state_dir = tmp / "state"
        self._starts = count(1)

    def bridge(
        self,
        *,
        script: str | Path | None = None,
        config: str | Path | None = None,
        profile: str | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        """acp-bridge on ``script`` (the scripted provider), or on the provider of
        ``config`` (a TOML file of profiles; ``profile`` picks one), with ``args``
        added; without either, the scripted provider's built-in script."""
        options: list[str] = []
        if config is not None:
            options += ["--config", str(config)]
            if profile is not None:
                options += ["--profile", profile]
        else:
            options += ["--provider", "fake"]
        if script is not None:
            options += ["--script", str(script)]
        options += ["--state-dir", str(self.state_dir), *args]
        return self._start([*self.bridge_command, *options], env, cwd, self.state_dir)

    def command(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        """Any ACP agent: ``command`` run as it is."""
        return self._start(list(command), env, cwd, None)

    def start(
        self,
        *,
        script: str | Path | None = None,
        config: str | Path | None = None,
        profile: str | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> AbstractAsyncContextManager[Agent]:
        """The ``--acp-agent`` command if one was given (the other arguments but
        ``env`` and ``cwd`` are then unused), else `bridge` with these arguments."""
        if self.default is not None:
            return self.command(self.default, env=env, cwd=cwd)
        return self.bridge(
            script=script, config=config, profile=profile, args=args, env=env, cwd=cwd
        )

    def _start(
        self,
        command: list[str],
        env: dict[str, str] | None,
        cwd: str | Path | None,
        state_dir: Path | None,
    ) -> AbstractAsyncContextManager[Agent]:
        stderr = self.tmp / f"agent-{next(self._starts)}.stderr"
        return start_agent(
            command,
            workspace=self.workspace,
            state_dir=state_dir,
            env=env if env is not None else self.env,
            cwd=cwd,
            stderr=stderr,
            tmp=self.tmp,
            runner=self.runner,
        )


__all__ = ["AgentLauncher"]
