"""The scripted stream hands out the events it has ready in one call (`take_ready`).

The turn's hot loop takes a stream's ready events a few dozen at a time
instead of awaiting each (a coroutine per event).  What it gets must be
exactly what iterating the stream one event at a time gives, in the same
order, and a pause, a hang or a failure must still be awaited: `take_ready`
stops before them.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_bridge.providers.base import (
    BlockEnd,
    Finish,
    ModelRequest,
    ProviderError,
    StreamEvent,
    TextDelta,
)
from acp_bridge.providers.script_format import parse_script
from acp_bridge.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio

REQUEST = ModelRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def provider(*events: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(parse_script({"responses": [{"events": list(events)}]}, "test"))


async def one_by_one(p: ScriptedProvider) -> list[StreamEvent]:
    async with p.stream(REQUEST) as events:
        return [event async for event in events]


async def ready_first(p: ScriptedProvider, limit: int) -> tuple[list[StreamEvent], list[int]]:
    """The stream read as the hot loop reads it; and how many each call gave."""
    got: list[StreamEvent] = []
    sizes: list[int] = []
    async with p.stream(REQUEST) as events:
        while True:
            ready = events.take_ready(limit)
            sizes.append(len(ready))
            if not ready:
                try:
                    ready = [await events.__anext__()]
                except StopAsyncIteration:
                    return got, sizes
            got.extend(ready)


async def test_ready_events_are_the_events_in_order_and_a_pause_is_still_awaited() -> None:
    script = (
        {"text": "abcdefgh", "chunk_size": 1},
        {"delay_ms": 1},
        {"text": "ijkl", "chunk_size": 2},
    )
    expected = await one_by_one(provider(*script))
    got, sizes = await ready_first(provider(*script), 3)
    assert got == expected
    assert [e.text for e in got if isinstance(e, TextDelta)] == [*"abcdefgh", "ij", "kl"]
    assert isinstance(got[-1], Finish)
    assert isinstance(got[-2], BlockEnd)
    # At most the limit at once; the pause gives nothing ready: it is awaited.
    assert max(sizes) == 3
    assert 0 in sizes[1:-1]


async def test_an_endless_answer_is_ready_the_limit_at_a_time() -> None:
    p = provider({"endless": {"text": "tok "}})
    async with p.stream(REQUEST) as events:
        first = await events.__anext__()
        # Then the answer turns endless (a step of the script, awaited once).
        assert events.take_ready(64) == []
        assert await events.__anext__() == first
        ready = events.take_ready(64)
        assert ready == [first] * 64
        assert events.abort()
        assert events.take_ready(64) == []


async def test_a_failure_is_not_ready_it_is_raised_by_the_next_await() -> None:
    p = provider({"text": "ab", "chunk_size": 1}, {"error": {"message": "boom"}})
    async with p.stream(REQUEST) as events:
        ready = events.take_ready(64)
        assert [e.text for e in ready if isinstance(e, TextDelta)] == ["a", "b"]
        assert events.take_ready(64) == []
        with pytest.raises(ProviderError, match="boom"):
            await events.__anext__()
