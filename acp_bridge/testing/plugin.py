"""The pytest plugin of the kit, registered as the ``pytest11`` entry point
``acp_bridge``: installed with ``pip install 'acp-bridge-agent[testing]'``, it
is active in every pytest run of that environment.

Fixtures:

``acp_agent``
    an `AgentLauncher`: ``async with acp_agent.bridge(script=...) as agent``.
``acp_workspace``
    the folder the test editor serves (``tmp_path/workspace``).
``acp_snapshot``
    syrupy's ``snapshot`` with the `TranscriptSnapshot` extension.
``acp_bridge_command``, ``acp_agent_command``
    the command lines the launcher uses; override them in a ``conftest.py``.

Options: ``--acp-agent COMMAND`` (or the ini key ``acp_agent``) makes
``acp_agent.start()`` run that command instead of acp-bridge;
``acp_bridge_command`` (ini) is the acp-bridge command line the launcher adds
its options to, for an agent built on acp-bridge.  In both, ``{python}`` is
this interpreter and ``{rootdir}`` pytest's root folder.

This module imports nothing but pytest until a fixture is used, so it costs
nothing in an environment without the ``testing`` extra.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .agent import Runner
    from .launcher import AgentLauncher


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp", "ACP agent tests (acp_bridge.testing)")
    group.addoption(
        "--acp-agent",
        dest="acp_agent",
        default=None,
        metavar="COMMAND",
        help="the agent acp_agent.start() runs, as a command line "
        "(default: acp-bridge on the test's script)",
    )
    parser.addini(
        "acp_agent",
        "the agent acp_agent.start() runs, as a command line ({python}, {rootdir} expanded)",
        default="",
    )
    parser.addini(
        "acp_bridge_command",
        "the acp-bridge command line acp_agent.bridge() adds its options to "
        "({python}, {rootdir} expanded; default: {python} -m acp_bridge)",
        default="",
    )


def _command(config: pytest.Config, line: str) -> list[str]:
    expanded = line.replace("{python}", shlex.quote(sys.executable)).replace(
        "{rootdir}", shlex.quote(str(config.rootpath))
    )
    return shlex.split(expanded)


@pytest.fixture
def acp_bridge_command(pytestconfig: pytest.Config) -> list[str]:
    """The acp-bridge command line (ini ``acp_bridge_command``)."""
    from ..client import bridge_command

    line = str(pytestconfig.getini("acp_bridge_command"))
    return _command(pytestconfig, line) if line else bridge_command()


@pytest.fixture
def acp_agent_command(pytestconfig: pytest.Config) -> list[str] | None:
    """The command ``acp_agent.start()`` runs instead of acp-bridge, if any."""
    line = pytestconfig.getoption("acp_agent") or str(pytestconfig.getini("acp_agent"))
    return _command(pytestconfig, line) if line else None


@pytest.fixture
def acp_workspace(tmp_path: Path) -> Path:
    """The folder the test editor serves files and terminals from."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return workspace


@pytest.fixture
def acp_agent_runner() -> Runner | None:
    """How the kit starts an agent's command (`acp_bridge.testing.agent.Runner`):
    None for `acp_bridge.client.running`; override it in a conftest to start
    agents another way."""
    return None


@pytest.fixture
def acp_agent(
    tmp_path: Path,
    acp_workspace: Path,
    acp_bridge_command: list[str],
    acp_agent_command: list[str] | None,
    acp_agent_runner: Runner | None,
) -> AgentLauncher:
    """Starts agents for the test: ``async with acp_agent.bridge(script=path) as agent``."""
    from .launcher import AgentLauncher

    return AgentLauncher(
        tmp_path,
        workspace=acp_workspace,
        bridge=acp_bridge_command,
        default=acp_agent_command,
        runner=acp_agent_runner,
    )


@pytest.fixture
def acp_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` storing whole sessions (`TranscriptSnapshot`)."""
    from .snapshot import TranscriptSnapshot

    return snapshot.use_extension(TranscriptSnapshot)
