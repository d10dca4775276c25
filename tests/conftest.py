"""Shared pytest configuration."""

from __future__ import annotations

import pytest
from acp_schema import AcpSchema, load_acp_schema


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def acp_schema() -> AcpSchema:
    schema = load_acp_schema()
    if schema is None:
        pytest.skip(
            "the official ACP schema (shared/acp/schema.json beside the repository) is absent"
        )
    return schema
