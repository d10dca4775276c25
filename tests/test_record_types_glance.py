"""`acp_bridge.log.upcast.record_types`, the glance of the fast reads, says
what a check of each record one by one says.

The glance is passes in C over a slice's records, and it leaves some checks
to others (a value that is not a dict fails the read of its fields; a type
that is not a string is not among the known ones); the reference below is
the plain loop that the `load_log` slow path follows, record by record.  On
JSON data of every odd shape the two agree, or a fast read would take a log
that the slow path refuses (or the reverse).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from acp_bridge.log.records import RECORD_TYPES
from acp_bridge.log.upcast import record_types


def reference(values: Any, current: int, first: int = 0) -> list[str] | None:
    if type(values) is not list:
        return None
    kinds = []
    for seq, value in enumerate(values, start=first):
        if type(value) is not dict or not {"v", "seq", "type"} <= value.keys():
            return None
        version, number, kind = value["v"], value["seq"], value["type"]
        if type(version) is not int or version != current:
            return None
        if type(number) is not int or number != seq:
            return None
        if type(kind) is not str or kind not in RECORD_TYPES:
            return None
        kinds.append(kind)
    return kinds


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.floats(0, 3) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=4,
)
versions = st.sampled_from([1, 2, 0, 1.0, True, "1", None]) | json_values
seqs = st.sampled_from([0, 1, 2, 3, 1.0, True, False, "0", None]) | json_values
kinds = st.sampled_from([*sorted(RECORD_TYPES)[:3], "stream/delta", "nope", 1, None]) | json_values


@st.composite
def record(draw: st.DrawFn, seq: int) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(json_values)  # not a record at all
    value: dict[str, Any] = {}
    fields = {
        "v": draw(st.just(1) | versions),
        "seq": draw(st.just(seq) | seqs),
        "type": draw(st.just("turn/start") | kinds),
    }
    for name, field in fields.items():
        if draw(st.integers(0, 10)) > 0:
            value[name] = field
    return value


@st.composite
def slices(draw: st.DrawFn) -> tuple[list[Any], int]:
    first = draw(st.sampled_from([0, 2]))
    count = draw(st.integers(0, 6))
    return [draw(record(first + i)) for i in range(count)], first


@settings(max_examples=1000, deadline=None)
@given(slices())
@example(([{"v": 1, "seq": 0, "type": ["turn/start"]}], 0))
@example(([{"v": 1, "seq": 0, "type": 7}], 0))
@example(([{"v": True, "seq": 0, "type": "turn/start"}], 0))
@example(([{"v": 1, "seq": 0.0, "type": "turn/start"}], 0))
@example(([["v", "seq", "type"]], 0))
@example(([{"v": 1, "seq": 0, "type": "turn/start"}, "v"], 0))
def test_the_glance_says_what_a_check_of_each_record_says(drawn: tuple[list[Any], int]) -> None:
    values, first = drawn
    # As the reads have them: what orjson parsed.
    values = orjson.loads(orjson.dumps(values))
    assert record_types(values, 1, first) == reference(values, 1, first)


def test_only_a_list_is_glanced_at() -> None:
    record = {"v": 1, "seq": 0, "type": "turn/start"}
    assert record_types([record], 1) == ["turn/start"]
    assert record_types({"0": record}, 1) is None
    assert record_types("[]", 1) is None
