"""``abort()`` alone closes the HTTP connection: the server sees the disconnect
before the stream object is closed or awaited again (a user stop answers at once)."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest
from provider_server import Reply, WireServer, openai_chunk

from acp_bridge.providers.base import ModelRequest, TextDelta
from acp_bridge.providers.build import http_provider_factory, provider_config

pytestmark = pytest.mark.anyio


async def test_abort_disconnects_by_itself() -> None:
    reply = Reply([openai_chunk({"content": "Hello"})], hold=True)
    with WireServer([reply]) as server:
        config = provider_config({"provider": "openai", "base_url": server.url}, idle_timeout=30.0)
        provider = http_provider_factory(config, None)()
        request = ModelRequest(messages=[{"role": "user", "content": [], "interrupted": False}])
        async with provider.stream(request) as events:
            first = await events.__anext__()
            assert first == TextDelta(0, "Hello")
            assert events.abort() is True
            seen = await anyio.to_thread.run_sync(server.disconnected.wait, 10)
            assert seen, "the server did not see the connection close after abort()"
            with pytest.raises(StopAsyncIteration):
                await events.__anext__()
