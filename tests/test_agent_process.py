"""The client's ends of an agent's pipes (`acp_bridge.agent_process`)."""

from __future__ import annotations

import os

import anyio
import pytest

from acp_bridge.agent_process import FdSink

pytestmark = pytest.mark.anyio


async def test_a_closed_sink_refuses_to_send() -> None:
    """A send after the sink was closed (an answer the editor finished after
    closing the agent's stdin) is a clean ClosedResourceError: the closed
    descriptor is never waited on or written to, whatever file now has its number."""
    read_end, write_end = os.pipe()
    try:
        sink = FdSink(write_end)
        await sink.send(b"one\n")
        await sink.aclose()
        reused = os.dup(read_end)  # may take the closed descriptor's number
        try:
            with pytest.raises(anyio.ClosedResourceError):
                await sink.send(b"two\n")
        finally:
            os.close(reused)
        assert os.read(read_end, 100) == b"one\n"
    finally:
        os.close(read_end)
