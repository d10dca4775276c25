"""The incremental estimate of the next request equals the one computed from scratch.

`RequestEstimate` (kept per session, asked before every model request) must
give exactly what `next_request_tokens` gives for the same log and history,
after every record of random logs: usage reported or not, refusals,
regenerates, completed compactions (which start the projection again),
images, and a history read back from the log (a new records list).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_history_projection import surface_logs

from acp_bridge.context.estimate import (
    RequestEstimate,
    _measure,
    _measure_stripped,
    estimate_request,
    next_request_tokens,
)
from acp_bridge.log.projection import HistoryProjection
from acp_bridge.providers.base import ToolSpec

Record = dict[str, Any]
SYSTEM = "You are a test."
TOOLS = (ToolSpec("read_file", "Read a file", {"type": "object"}),)


@st.composite
def logs_with_usage(draw: st.DrawFn) -> list[Record]:
    """`surface_logs`, with usage on some replies, images, and completed compactions."""
    records: list[Record] = []
    for record in draw(surface_logs()):
        if record["type"] == "assistant/message" and draw(st.booleans()):
            record["usage"] = {
                "input_tokens": draw(st.integers(0, 500)),
                "output_tokens": draw(st.integers(0, 50)),
            }
        if record["type"] == "user/message" and draw(st.integers(0, 6)) == 0:
            record["content"] = [*record["content"], {"type": "image", "data": "AAAA"}]
        if records and draw(st.integers(0, 15)) == 0:
            kept = draw(st.integers(0, len(records) - 1))
            records.append(
                {
                    "type": "compaction",
                    "turn": record["turn"],
                    "step": 0,
                    "status": "completed",
                    "summary": "what happened so far",
                    "kept_from": kept,
                }
            )
        records.append(record)
    for seq, record in enumerate(records):
        record["seq"] = seq
    return records


def assert_equal_along(records: list[Record], estimate: RequestEstimate) -> None:
    projection = HistoryProjection()
    for i, record in enumerate(records):
        projection.append(record)
        messages = projection.messages()
        expected = next_request_tokens(projection.records, messages, SYSTEM, TOOLS)
        got = estimate.next_request_tokens(projection.records, messages, SYSTEM, TOOLS)
        assert got == expected, f"after record {i}: {record}"


@settings(max_examples=120, deadline=None)
@given(logs_with_usage())
def test_the_incremental_estimate_equals_the_full_one(records: list[Record]) -> None:
    assert_equal_along(records, RequestEstimate())


@settings(max_examples=20, deadline=None)
@given(logs_with_usage(), logs_with_usage())
def test_a_log_read_again_is_estimated_anew(first: list[Record], second: list[Record]) -> None:
    """The same estimate, given another session's records list, forgets the first."""
    estimate = RequestEstimate()
    assert_equal_along(first, estimate)
    assert_equal_along(second, estimate)


@settings(max_examples=60, deadline=None)
@given(logs_with_usage())
def test_the_incremental_request_size_equals_the_full_one(records: list[Record]) -> None:
    """`RequestEstimate.request_tokens` (a reply's usage estimate, asked after every
    response of a model that reports none) is `estimate_request` of the same history."""
    projection = HistoryProjection()
    estimate = RequestEstimate()
    for i, record in enumerate(records):
        projection.append(record)
        messages = projection.messages()
        expected = estimate_request(messages, SYSTEM, TOOLS)
        assert estimate.request_tokens(messages, SYSTEM, TOOLS) == expected, f"after record {i}"


def test_an_older_view_is_estimated_with_its_own_messages() -> None:
    """A view taken before more messages joined the stable part counts only its own."""
    projection = HistoryProjection()
    estimate = RequestEstimate()
    for turn in range(1, 6):
        text = [{"type": "text", "text": f"question {turn}"}]
        projection.append({"type": "user/message", "turn": turn, "step": 0, "content": text})
        if turn == 3:
            old = projection.messages()
        answer = [{"type": "text", "text": f"answer {turn}"}]
        projection.append({"type": "assistant/message", "turn": turn, "step": 1, "content": answer})
    records = projection.records
    latest = projection.messages()
    assert estimate.next_request_tokens(records, latest, SYSTEM, TOOLS) == next_request_tokens(
        records, latest, SYSTEM, TOOLS
    )
    assert len(old) < len(latest)
    assert estimate.next_request_tokens(records, old, SYSTEM, TOOLS) == next_request_tokens(
        records, old, SYSTEM, TOOLS
    )


def test_other_tools_are_measured_again() -> None:
    """The tools' size is kept between requests, but only while they are the same tools."""
    projection = HistoryProjection()
    text = [{"type": "text", "text": "question"}]
    projection.append({"type": "user/message", "turn": 1, "step": 0, "content": text})
    records, messages = projection.records, projection.messages()
    more = (*TOOLS, ToolSpec("write_file", "Write a file " * 50, {"type": "object"}))
    estimate = RequestEstimate()
    for tools in (TOOLS, TOOLS, more, more, TOOLS, ()):
        expected = next_request_tokens(records, messages, SYSTEM, tools)
        assert estimate.next_request_tokens(records, messages, SYSTEM, tools) == expected


_leaves = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8)
_keys = st.sampled_from(["type", "text", "data", "blob", "image", "resource", "uri"]) | st.text(
    max_size=4
)
_types = st.sampled_from(["image", "resource", "text", "blob"])


def _json_values(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = st.dictionaries(_keys, children, max_size=4)
    typed = st.builds(lambda kind, rest: {"type": kind, **rest}, _types, objects)
    return (
        st.lists(children, max_size=4)
        | objects
        | typed
        | st.tuples(children)
        | objects.map(MappingProxyType)
    )


@settings(max_examples=400, deadline=None)
@given(st.recursive(_leaves, _json_values, max_leaves=20))
@example([{"type": "text", "text": "a"}, {"type": "resource", "blob": "AAAA", "uri": "x"}])
@example({"content": [{"type": "image", "data": "AAAA"}]})
@example({"content": MappingProxyType({"type": "text", "text": "a"})})
def test_a_value_is_measured_as_when_its_images_were_stripped(value: Any) -> None:
    """The quick measure (JSON that names no image as it is) equals the copy without images."""
    try:
        expected = _measure_stripped(value)
    except orjson.JSONEncodeError:
        with pytest.raises(orjson.JSONEncodeError):
            _measure(value)
        return
    assert _measure(value) == expected
