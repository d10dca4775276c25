"""Each reader of a loaded log that is given only the records of its types
(`acp_bridge.log.by_type`) answers as it does given every record.

A load hands the readers of a few types (how turns ended, the last turn, the
regenerates, the markers of stopped replies, the plan, the mode and the
remembered choices, the cost, the title, the session's start) only the
records of those types, picked by the types the read had.  If a reader came
to read a type its set lacks, the load would answer differently from the
whole log: these tests would fail.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.acp import stored
from acp_bridge.context.state import COST_TYPES, cost_so_far
from acp_bridge.log.by_type import Typed, of_types
from acp_bridge.log.derive import REGENERATE_TYPES, replaced_turns
from acp_bridge.log.records import RECORD_TYPES
from acp_bridge.log.replay import MARKER_TYPES, _markers
from acp_bridge.sessions.info import title_of
from acp_bridge.tools.plan import NAME as PLAN
from acp_bridge.tools.plan import PLAN_TYPES, plans_of
from acp_bridge.tools.state import STATE_TYPES, from_records

Record = dict[str, Any]

READERS: list[tuple[str, Callable[[list[Record]], Any], Container[str]]] = [
    ("_markers", _markers, MARKER_TYPES),
    ("replaced_turns", replaced_turns, REGENERATE_TYPES),
    ("plans_of", plans_of, PLAN_TYPES),
    ("from_records", lambda records: from_records(records, "/w"), STATE_TYPES),
    ("cost_so_far", cost_so_far, COST_TYPES),
    ("_last_turn", stored._last_turn, stored.TURN_STARTS),
    ("_endings", stored._endings, stored.TURN_ENDS),
    ("title_of", title_of, stored.TITLE_TYPES),
    (
        "the start",
        lambda records: next((r for r in records if r["type"] == "session/start"), None),
        stored.STARTS,
    ),
]

# Values that the readers look for, under the fields they read, in any record.
fields = st.fixed_dictionaries(
    {},
    optional={
        "attempt": st.sampled_from(["att_a", "att_b", 3]),
        "interrupted": st.booleans(),
        "recovered": st.just("crashed"),
        "outcome": st.sampled_from(["empty", "crashed"]),
        "regenerates": st.integers(1, 4),
        "name": st.sampled_from([PLAN, "read_file"]),
        "status": st.sampled_from(["dispatched", "failed"]),
        "input": st.sampled_from(
            [
                {"entries": [{"content": "a step", "status": "pending"}]},
                {"plan_id": "b", "markdown": "# Steps"},
                {"plan_id": "b", "remove": True},
            ]
        ),
        "tool_call_id": st.sampled_from(["c1", "c2"]),
        "is_error": st.booleans(),
        "mode": st.sampled_from(["ask", "read_only", "nonsense"]),
        "tool": st.sampled_from(["write_file", "run"]),
        "decision": st.sampled_from(["allow_always", "reject_always"]),
        "cwd": st.sampled_from(["/w", "/elsewhere"]),
        "cost": st.just({"amount": 0.5, "currency": "USD"}),
        "reason": st.sampled_from(["end_turn", "cancelled"]),
        "content": st.just([{"type": "text", "text": "a question"}]),
        "prompt": st.just([{"type": "text", "text": "a prompt"}]),
        "session_id": st.just("sess_t"),
        "additional_directories": st.just(["/elsewhere"]),
    },
)
records_of_any_type = st.lists(
    st.tuples(st.sampled_from(sorted(RECORD_TYPES)), st.integers(0, 4), fields), max_size=40
)


def as_records(drawn: list[tuple[str, int, Record]]) -> list[Record]:
    return [{"type": kind, "turn": turn, **rest} for kind, turn, rest in drawn]


@settings(max_examples=300, deadline=None)
@given(records_of_any_type)
def test_each_reader_answers_alike_from_the_records_of_its_types(
    drawn: list[tuple[str, int, Record]],
) -> None:
    records = as_records(drawn)
    kinds = [record["type"] for record in records]
    for name, reader, types in READERS:
        assert reader(of_types(records, kinds, types)) == reader(records), name


@settings(max_examples=100, deadline=None)
@given(records_of_any_type)
def test_typed_records_without_deltas_pick_alike_with_their_types_or_without(
    drawn: list[tuple[str, int, Record]],
) -> None:
    records = as_records(drawn)
    kinds = [record["type"] for record in records]
    typed, untyped = Typed.without_deltas(records, kinds), Typed.without_deltas(records, None)
    assert typed.records == untyped.records
    assert typed.records == [r for r in records if r["type"] != "stream/delta"]
    assert typed.kinds == [r["type"] for r in typed.records]
    for _, _, types in READERS:
        assert typed.of_types(types) == untyped.of_types(types)


def test_the_types_must_be_one_per_record() -> None:
    with pytest.raises(ValueError, match="one type per record"):
        of_types([{"type": "turn/start"}], [], {"turn/start"})
