"""The log's closed vocabularies are the `Literal` types of `acp_bridge.log.records`.

The JSON Schema of a record (``schemas/event-log.schema.json``) lists the same
values as the types the recorder's parameters are declared with, so a reason
or an outcome the code may write is one the schema accepts, and the other
way round.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from support.harness import EVENT_LOG_SCHEMA as SCHEMA

from acp_bridge.log import records

# (record definition, field) -> the Literal type its values come from.
VOCABULARIES = [
    ("turn_end", "reason", records.TurnEndReason),
    ("step_end", "reason", records.StepEndReason),
    ("assistant_attempt", "outcome", records.AttemptOutcome),
    ("stream_end", "outcome", records.StreamOutcome),
    ("tool_call", "status", records.ToolCallStatus),
    ("compaction", "status", records.CompactionStatus),
    ("compaction", "trigger", records.CompactionTrigger),
]


@pytest.mark.parametrize(
    ("definition", "name", "values"), VOCABULARIES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_the_schema_lists_the_values_of_the_type(definition: str, name: str, values: Any) -> None:
    enum = SCHEMA["$defs"][definition]["properties"][name]["enum"]
    assert sorted(enum) == sorted(get_args(values))


def test_every_record_type_is_in_the_schema() -> None:
    assert set(SCHEMA["properties"]["type"]["enum"]) == records.RECORD_TYPES


def test_the_stop_reasons_are_turn_end_reasons() -> None:
    assert set(get_args(records.StopReason)) <= set(get_args(records.TurnEndReason))
