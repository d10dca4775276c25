"""Shared pytest configuration."""

from __future__ import annotations

import pytest
from acp_schema import AcpSchema, load_acp_schema


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def acp_schema() -> AcpSchema:
    return load_acp_schema()
