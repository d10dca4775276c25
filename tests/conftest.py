"""Shared pytest configuration: the fast tier, the `bridge` fixture, a private config dir."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp_schema import AcpSchema, load_acp_schema
from hypothesis import settings
from support import zygote
from support.bridge import BridgeStarter, Mode, running_bridge, start_bridge

from acp_bridge.client import AcpClient
from acp_bridge.testing.agent import Runner

# The suite spawns hundreds of bridges: let them keep the bytecode they compile
# (an environment that sets PYTHONDONTWRITEBYTECODE would make each one compile
# the whole package again).  __pycache__ is ignored by git.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# ... and let this process keep the test modules pytest compiles with its
# assertion rewriting (imported after this file), a few seconds a run.
sys.dont_write_bytecode = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        help="also run the tests marked slow (left out by default; CI runs everything)",
    )
    parser.addoption(
        "--spawn",
        choices=("fork", "fresh"),
        default=None,
        help="how `start_bridge` starts a subprocess bridge: forked from a process that "
        "imported the bridge once (fork, the default) or as a new interpreter (fresh); "
        f"also {zygote.ENV_SPAWN}=fresh",
    )


# ``-n auto`` (pyproject's addopts): test processes side by side, each file in
# one of them (``--dist loadfile``: a file's module fixtures are built once).
# Most tests wait on a subprocess, so there are more of them than cores.
WORKERS_PER_CPU = 2
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many test processes ``-n auto`` starts: none (this process runs the
    tests) for ``--snapshot-update``, which must see every test to tell an unused
    snapshot, or for a run of named tests (``file.py::test``), else two per CPU,
    at most four."""
    if config.getoption("snapshot_update", False):
        return 0
    if any("::" in arg for arg in config.args):
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(MAX_WORKERS, WORKERS_PER_CPU * (cpus or 1))


def pytest_configure(config: pytest.Config) -> None:
    spawn = config.getoption("--spawn")
    if spawn is not None:
        os.environ[zygote.ENV_SPAWN] = spawn


# In the fast tier a hypothesis test runs this fraction of its examples (at
# least FAST_MIN_EXAMPLES): every property still runs, on fewer cases.
FAST_EXAMPLES_FRACTION = 10
FAST_MIN_EXAMPLES = 5


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast tier: without ``--all`` or a ``-m`` expression, tests marked
    ``slow`` are deselected (reported as such in the summary line) and each
    hypothesis test runs a tenth of its ``max_examples``."""
    if config.getoption("--all") or config.getoption("markexpr"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    for item in items:
        _fewer_examples(getattr(item, "obj", None))


def _fewer_examples(test: Any) -> None:
    """Cut a hypothesis test's examples for the fast tier (once per function:
    the parametrized items of a test share it)."""
    if not getattr(test, "is_hypothesis_test", False):
        return
    if getattr(test, "_acp_bridge_fast_tier", False):
        return
    full: settings = test._hypothesis_internal_use_settings
    fewer = max(FAST_MIN_EXAMPLES, -(-full.max_examples // FAST_EXAMPLES_FRACTION))
    test._hypothesis_internal_use_settings = settings(
        parent=full, max_examples=min(full.max_examples, fewer)
    )
    test._acp_bridge_fast_tier = True


@pytest.fixture(autouse=True)
def _cold_bridges(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold tier: a test marked ``cold`` starts each bridge as a new
    interpreter, as an editor does, not forked from the pre-imported zygote, so
    every run of the suite starts some bridges the way users do."""
    if request.node.get_closest_marker("cold") is not None:
        monkeypatch.setenv(zygote.ENV_SPAWN, "fresh")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def acp_schema() -> AcpSchema:
    return load_acp_schema()


@pytest.fixture(autouse=True, scope="session")
def _no_config_of_the_person_running_the_tests(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Every bridge a test starts (they inherit this environment) reads an empty
    config directory, not the config file or stored setup of whoever runs the tests."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACP_BRIDGE_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _bridge_zygote() -> Iterator[None]:
    """The zygote `start_bridge` forks bridges from (started on first use) is
    stopped when the session ends."""
    yield
    zygote.close()


@pytest.fixture
def acp_agent_runner() -> Runner:
    """The kit's ``acp_agent`` forks ``python -m acp_bridge`` from the zygote too."""
    return running_bridge


@pytest.fixture
def bridge_mode() -> Mode:
    """How `bridge` runs the bridge; parametrize it to run a test in both modes
    (``@pytest.mark.parametrize("bridge_mode", support.bridge.MODES)``)."""
    return "subprocess"


@pytest.fixture
def bridge(tmp_path: Path, bridge_mode: Mode) -> BridgeStarter:
    """Start a bridge: ``async with bridge(*options, script=path) as client:``.

    Its state is in ``tmp_path / "state"`` and, as a subprocess, its stderr in
    ``tmp_path / "stderr.txt"``; every keyword of `support.bridge.start_bridge`
    can be given.
    """

    @asynccontextmanager
    async def start(*extra: str, **options: Any) -> AsyncIterator[AcpClient]:
        if bridge_mode == "subprocess":
            options.setdefault("stderr", tmp_path / "stderr.txt")
        async with start_bridge(
            options.pop("state_dir", tmp_path / "state"), *extra, mode=bridge_mode, **options
        ) as client:
            yield client

    return start
