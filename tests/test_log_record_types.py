"""The record types are defined once, in `acp_bridge.log.records.models`.

The JSON Schema in ``schemas/`` is generated from those models; the readers'
open models, the vocabulary of `acp_bridge.log.records` and the models agree;
and the closed models accept and reject what the schema does.
"""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from support.harness import EVENT_LOG_SCHEMA, EVENT_LOG_VALIDATOR
from test_log_check import realistic_log

from acp_bridge.log import records
from acp_bridge.log.records import read as record_models
from acp_bridge.log.records.models import (
    LEVEL_RULES,
    RECORDS,
    Level,
    record_type_of,
    records_by_type,
)
from acp_bridge.log.schema_gen import LEVELS, SCHEMA_PATH, build_event_log_schema, render
from acp_bridge.log.schema_gen import main as schema_main

Record = dict[str, Any]


def test_the_committed_schema_is_generated_from_the_models() -> None:
    """Edit acp_bridge/log/records/models.py, then run its generator."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), (
        "schemas/event-log.schema.json is stale: run python -m acp_bridge.log.schema_gen"
    )
    assert build_event_log_schema() == EVENT_LOG_SCHEMA


def test_the_generator_checks_and_writes(tmp_path: Path) -> None:
    out = tmp_path / "event-log.schema.json"
    assert schema_main(["--check", "--out", str(out)]) == 1  # missing
    assert schema_main(["--out", str(out)]) == 0
    assert schema_main(["--check", "--out", str(out)]) == 0
    out.write_text(out.read_text().replace("tool_use", "tool_usage"))
    assert schema_main(["--check", "--out", str(out)]) == 1


def test_every_record_type_has_one_model_and_a_reader() -> None:
    models = records_by_type()
    assert sum(len(record_type_of(model)) for model in RECORDS) == len(models)  # no type twice
    assert set(models) == records.RECORD_TYPES
    assert set(record_models.RECORD_MODELS) == records.RECORD_TYPES


@pytest.mark.parametrize("record_type", sorted(records.RECORD_TYPES))
def test_the_readers_rely_only_on_fields_the_writer_has(record_type: str) -> None:
    """The open read-side models are a projection of the closed definition."""
    closed = records_by_type()[record_type].model_fields
    read = record_models.RECORD_MODELS[record_type].model_fields
    assert set(read) <= set(closed)
    for name, field in read.items():
        if field.is_required():
            assert closed[name].is_required(), name


def test_the_closed_models_are_closed() -> None:
    for model in RECORDS:
        assert model.model_config.get("extra") == "forbid", model.__name__


def _mutants(record: Record) -> list[Record]:
    """The record with a field added, each field left out, or set to a wrong value."""
    out = [{**record, "extra": 1}]
    for key in record:
        out.append({k: v for k, v in record.items() if k != key})
        value: object
        for value in (None, "x", -1, 1.5, True, [], {}):
            if value != record[key]:
                out.append({**record, key: value})
    for key in ("turn", "step"):
        out += [{**record, key: record[key] + 1}, {**record, key: 0}]
    return out


def _model_accepts(record: Record) -> bool:
    record_type = record.get("type")
    model = records_by_type().get(record_type) if isinstance(record_type, str) else None
    if model is None:
        return False
    try:
        model.model_validate(copy.deepcopy(record))
    except ValidationError:
        return False
    return True


def test_the_models_accept_and_reject_what_the_schema_does() -> None:
    log = realistic_log()
    seen = {record["type"] for record in log}
    assert len(seen) >= 10
    for record in log:
        assert _model_accepts(record), record
        for mutant in _mutants(record):
            assert _model_accepts(mutant) == EVENT_LOG_VALIDATOR.is_valid(mutant), json.dumps(
                mutant
            )


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_the_schema_states_the_levels_of_the_models(level: Level) -> None:
    """`LEVELS` (the schema) and `LEVEL_RULES` (the models) say the same."""
    validator = jsonschema.Draft202012Validator(LEVELS[level])
    for turn, step in itertools.product(range(3), repeat=2):
        record = {"turn": turn, "step": step}
        assert validator.is_valid(record) == LEVEL_RULES[level](turn, step), record


def test_a_record_has_the_turn_and_step_of_its_level() -> None:
    start = {"v": 1, "seq": 0, "at": 1.0, "type": "step/start", "turn": 1, "step": 1}
    assert _model_accepts(start)
    with pytest.raises(ValidationError, match="is not step level"):
        records_by_type()["step/start"].model_validate({**start, "step": 0})
    assert not EVENT_LOG_VALIDATOR.is_valid({**start, "step": 0})
