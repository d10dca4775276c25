"""The stream assembler: views, re-chunking invariance and protocol errors."""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.loop.assembler import AssemblyError, StreamAssembler
from acp_bridge.providers.base import (
    BlockEnd,
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)


def assemble(events: Sequence[StreamEvent]) -> StreamAssembler:
    assembler = StreamAssembler()
    for event in events:
        assembler.feed(event)
    return assembler


MIXED: list[StreamEvent] = [
    ReasoningDelta(0, "Let me "),
    ReasoningDelta(0, "think."),
    BlockEnd(0),
    TextDelta(1, "I will "),
    TextDelta(1, "read it."),
    BlockEnd(1),
    ToolCallStart(2, "call_1", "read_file"),
    ToolCallDelta(2, '{"path": '),
    ToolCallDelta(2, '"a.txt"}'),
    BlockEnd(2),
    Usage(input_tokens=10, output_tokens=20, context_window=1000),
    Finish("tool_use"),
]


def test_blocks_of_a_finished_stream() -> None:
    assembler = assemble(MIXED)
    assert assembler.blocks() == [
        {"type": "reasoning", "text": "Let me think."},
        {"type": "text", "text": "I will read it."},
        {"type": "tool_call", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
    ]
    assert assembler.finish == "tool_use"
    assert assembler.usage == Usage(10, 20, 1000)


def test_views_are_repeatable() -> None:
    assembler = assemble(MIXED)
    assert assembler.blocks() == assembler.blocks()
    assert assembler.interrupted_blocks() == assembler.interrupted_blocks()


def test_fresh_assembler_is_empty() -> None:
    assembler = StreamAssembler()
    assert assembler.blocks() == []
    assert assembler.interrupted_blocks() == []
    assert assembler.completed_tool_calls() == []
    assert assembler.finish is None
    assert assembler.usage is None


def test_blocks_keep_first_seen_order_not_index_order() -> None:
    assembler = assemble([TextDelta(5, "first"), TextDelta(2, "second"), TextDelta(5, " again")])
    assert assembler.blocks() == [
        {"type": "text", "text": "first again"},
        {"type": "text", "text": "second"},
    ]


def test_whitespace_only_blocks_are_omitted() -> None:
    assembler = assemble(
        [
            TextDelta(0, " \n"),
            BlockEnd(0),
            ReasoningDelta(1, "\t"),
            BlockEnd(1),
            TextDelta(2, ""),
            TextDelta(3, " x "),
            Finish("end_turn"),
        ]
    )
    assert assembler.blocks() == [{"type": "text", "text": " x "}]
    assert assembler.interrupted_blocks() == [{"type": "text", "text": " x "}]


def test_no_interrupted_message_of_whitespace_and_tool_calls() -> None:
    assembler = assemble(
        [TextDelta(0, "  "), TextDelta(0, "\n"), ToolCallStart(1, "c", "t"), BlockEnd(1)]
    )
    assert assembler.interrupted_blocks() == []
    assembler.feed(ReasoningDelta(2, "hm"))
    assert assembler.interrupted_blocks() == [{"type": "reasoning", "text": "hm"}]


def test_tool_call_with_no_arguments_has_empty_input() -> None:
    assembler = assemble([ToolCallStart(0, "c1", "list"), BlockEnd(0), Finish("tool_use")])
    assert assembler.blocks() == [{"type": "tool_call", "id": "c1", "name": "list", "input": {}}]


@pytest.mark.parametrize("args", ['{"a": ', "[1, 2]", '"str"', "null", "{} {}"])
def test_tool_call_arguments_that_are_not_an_object_raise(args: str) -> None:
    assembler = assemble([ToolCallStart(0, "c1", "t"), ToolCallDelta(0, args), Finish("tool_use")])
    with pytest.raises(AssemblyError, match="c1"):
        assembler.blocks()
    with pytest.raises(AssemblyError, match="c1"):
        assembler.completed_tool_calls()


def test_interrupted_stream_drops_open_tool_call_and_keeps_text_around_it() -> None:
    assembler = assemble(
        [
            TextDelta(0, "Before."),
            BlockEnd(0),
            ToolCallStart(1, "c1", "write_file"),
            ToolCallDelta(1, '{"path": "x", "con'),
            ReasoningDelta(2, "Meanwhile"),
            TextDelta(3, "After"),
        ]
    )
    assert assembler.interrupted_blocks() == [
        {"type": "text", "text": "Before."},
        {"type": "reasoning", "text": "Meanwhile"},
        {"type": "text", "text": "After"},
    ]
    assert assembler.completed_tool_calls() == []
    # The complete view refuses the half-streamed call.
    with pytest.raises(AssemblyError):
        assembler.blocks()


def test_interrupted_view_drops_complete_tool_calls_too() -> None:
    assembler = assemble(
        [
            TextDelta(0, "Reading."),
            ToolCallStart(1, "c1", "read_file"),
            ToolCallDelta(1, "{}"),
            BlockEnd(1),
            TextDelta(2, "Half a sen"),
        ]
    )
    assert assembler.interrupted_blocks() == [
        {"type": "text", "text": "Reading."},
        {"type": "text", "text": "Half a sen"},
    ]
    assert assembler.completed_tool_calls() == [
        {"type": "tool_call", "id": "c1", "name": "read_file", "input": {}}
    ]


def test_completed_tool_calls_are_closed_by_block_end_or_finish() -> None:
    assembler = assemble(
        [
            ToolCallStart(0, "c0", "a"),
            ToolCallDelta(0, '{"n": 0}'),
            BlockEnd(0),
            ToolCallStart(1, "c1", "b"),
            ToolCallDelta(1, '{"n": 1}'),
        ]
    )
    assert [c["id"] for c in assembler.completed_tool_calls()] == ["c0"]
    assembler.feed(Finish("tool_use"))
    assert assembler.completed_tool_calls() == [
        {"type": "tool_call", "id": "c0", "name": "a", "input": {"n": 0}},
        {"type": "tool_call", "id": "c1", "name": "b", "input": {"n": 1}},
    ]


def test_end_stream_without_finish_closes_tool_calls() -> None:
    assembler = assemble([ToolCallStart(0, "c0", "a"), ToolCallDelta(0, '{"n": 0}')])
    assert assembler.completed_tool_calls() == []
    assembler.end_stream()
    assert assembler.finish is None
    assert assembler.completed_tool_calls() == [
        {"type": "tool_call", "id": "c0", "name": "a", "input": {"n": 0}}
    ]
    with pytest.raises(AssemblyError, match="after the end of the stream"):
        assembler.feed(ToolCallDelta(0, " "))


def test_usage_after_finish_is_accepted_and_latest_wins() -> None:
    assembler = assemble([Usage(1, 0), TextDelta(0, "x"), Finish("end_turn"), Usage(1, 7)])
    assert assembler.usage == Usage(1, 7)


def test_block_end_is_idempotent_and_may_name_an_empty_block() -> None:
    assembler = assemble([BlockEnd(0), TextDelta(1, "x"), BlockEnd(1), BlockEnd(1)])
    assert assembler.blocks() == [{"type": "text", "text": "x"}]
    with pytest.raises(AssemblyError, match="closed block 0"):
        assembler.feed(TextDelta(0, "late"))


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            [TextDelta(0, "a"), ReasoningDelta(0, "b")],
            "reasoning delta to index 0, which is a text",
        ),
        (
            [ReasoningDelta(0, "a"), TextDelta(0, "b")],
            "text delta to index 0, which is a reasoning",
        ),
        (
            [ToolCallStart(0, "c", "t"), TextDelta(0, "b")],
            "text delta to index 0, which is a tool_call",
        ),
        ([TextDelta(0, "a"), ToolCallDelta(0, "{")], "tool_call delta to index 0, which is a text"),
        ([TextDelta(0, "a"), ToolCallStart(0, "c", "t")], "already a text block"),
        ([ToolCallStart(0, "c", "t"), ToolCallStart(0, "d", "t")], "already a tool_call block"),
        ([ToolCallDelta(3, "{}")], "before its start"),
        ([TextDelta(0, "a"), BlockEnd(0), TextDelta(0, "b")], "text delta to closed block 0"),
        (
            [ToolCallStart(0, "c", "t"), BlockEnd(0), ToolCallDelta(0, "{}")],
            "tool_call delta to closed block 0",
        ),
        ([TextDelta(0, "a"), Finish("end_turn"), TextDelta(0, "b")], "after the end of the stream"),
        ([Finish("end_turn"), TextDelta(1, "b")], "after the end of the stream"),
        ([Finish("end_turn"), ToolCallStart(1, "c", "t")], "after the end of the stream"),
        ([Finish("end_turn"), Finish("end_turn")], "finish after the end of the stream"),
    ],
)
def test_protocol_errors(events: list[StreamEvent], message: str) -> None:
    assembler = StreamAssembler()
    for event in events[:-1]:
        assembler.feed(event)
    with pytest.raises(AssemblyError, match=message):
        assembler.feed(events[-1])


def test_non_event_is_rejected() -> None:
    with pytest.raises(AssemblyError, match="not a stream event"):
        StreamAssembler().feed("hello")  # type: ignore[arg-type]


# -- re-chunking invariance ----------------------------------------------------

# A logical block: (kind, content) where kind is text, reasoning or tool.
_block = st.one_of(
    st.tuples(st.just("text"), st.text(min_size=1)),
    st.tuples(st.just("reasoning"), st.text(min_size=1)),
    st.tuples(
        st.just("tool"),
        st.dictionaries(
            st.text(max_size=5),
            st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=5),
            max_size=3,
        ),
    ),
)


def _split(text: str, cuts: Sequence[int]) -> list[str]:
    """Split ``text`` at the given cut points (taken modulo its length)."""
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in pairwise(points)] or [text]


def _events(blocks: Sequence[tuple[str, Any]], cuts: Sequence[Sequence[int]]) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    for index, ((kind, content), block_cuts) in enumerate(zip(blocks, cuts, strict=True)):
        if kind == "tool":
            events.append(ToolCallStart(index, f"call_{index}", "tool"))
            events += [ToolCallDelta(index, p) for p in _split(json.dumps(content), block_cuts)]
        elif kind == "text":
            events += [TextDelta(index, p) for p in _split(content, block_cuts)]
        else:
            events += [ReasoningDelta(index, p) for p in _split(content, block_cuts)]
        events.append(BlockEnd(index))
    events.append(Finish("end_turn"))
    return events


@st.composite
def _two_chunkings(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, Any]], list[StreamEvent], list[StreamEvent]]:
    blocks = draw(st.lists(_block, max_size=6))
    n = len(blocks)
    cuts = st.lists(
        st.lists(st.integers(min_value=0, max_value=1000), max_size=8), min_size=n, max_size=n
    )
    cuts_a, cuts_b = draw(cuts), draw(cuts)
    return blocks, _events(blocks, cuts_a), _events(blocks, cuts_b)


@given(_two_chunkings())
def test_rechunking_gives_identical_blocks(
    case: tuple[list[tuple[str, Any]], list[StreamEvent], list[StreamEvent]],
) -> None:
    blocks, events_a, events_b = case
    assembled = assemble(events_a).blocks()
    assert assembled == assemble(events_b).blocks()
    # ...and both equal the unsplit content.
    expected: list[dict[str, Any]] = []
    for index, (kind, content) in enumerate(blocks):
        if kind == "tool":
            expected.append(
                {"type": "tool_call", "id": f"call_{index}", "name": "tool", "input": content}
            )
        elif not content.isspace():
            expected.append({"type": kind, "text": content})
    assert assembled == expected


@given(st.text(min_size=1), st.lists(st.integers(min_value=0, max_value=200)))
def test_rechunked_text_deltas_join_exactly(text: str, cuts: list[int]) -> None:
    assembler = assemble([TextDelta(0, p) for p in _split(text, cuts)])
    whole = [{"type": "text", "text": text}] if not text.isspace() else []
    assert assembler.interrupted_blocks() == whole


@pytest.mark.parametrize("number", ["-9223372036854775809", "18446744073709551616"])
def test_tool_arguments_outside_64_bit_integers_are_malformed(number: str) -> None:
    asm = StreamAssembler()
    asm.feed(ToolCallStart(0, "call_1", "tool"))
    asm.feed(ToolCallDelta(0, '{"n": ' + number + "}"))
    asm.feed(BlockEnd(0))
    with pytest.raises(AssemblyError, match="64-bit"):
        asm.blocks()


def test_tool_arguments_at_the_64_bit_edge_are_exact() -> None:
    asm = StreamAssembler()
    asm.feed(ToolCallStart(0, "call_1", "tool"))
    asm.feed(ToolCallDelta(0, '{"n": -9223372036854775808, "m": 1.5}'))
    asm.feed(BlockEnd(0))
    assert asm.blocks()[0]["input"] == {"n": -(2**63), "m": 1.5}


@pytest.mark.parametrize("compacted", [False, True])
def test_retract_forgets_the_last_fragments_of_each_block(compacted: bool) -> None:
    """Blocks open at once (a text and a reasoning block, fragments interleaved):
    each loses its own last fragments, whatever order they came in."""
    asm = StreamAssembler()
    for event in (
        TextDelta(0, "Hel"),
        TextDelta(0, "lo "),
        ReasoningDelta(1, "hmm"),
        TextDelta(0, "wor"),
        ReasoningDelta(1, " well"),
        TextDelta(0, "ld"),
    ):
        asm.feed(event)
    if compacted:
        asm.compact()  # the fragments are joined: taken back by their text
    asm.retract({0: ["wor", "ld"], 1: [" well"]})
    assert asm.interrupted_blocks() == [
        {"type": "text", "text": "Hello "},
        {"type": "reasoning", "text": "hmm"},
    ]
    asm.feed(TextDelta(0, "there"))  # the block goes on after what was kept
    assert asm.interrupted_blocks()[0] == {"type": "text", "text": "Hello there"}


def test_retract_is_all_or_nothing() -> None:
    asm = StreamAssembler()
    asm.feed(TextDelta(0, "abc"))
    asm.feed(ReasoningDelta(1, "xyz"))
    for tails in ({0: ["c"], 1: ["q"]}, {0: ["c"], 5: ["z"]}):
        assert not asm.can_retract(tails)
        with pytest.raises(AssemblyError):
            asm.retract(tails)
        assert asm.interrupted_blocks() == [
            {"type": "text", "text": "abc"},
            {"type": "reasoning", "text": "xyz"},
        ]
