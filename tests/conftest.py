"""Shared pytest configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from acp_schema import AcpSchema, load_acp_schema


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
