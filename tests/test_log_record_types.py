"""The record types are defined once, in `acp_bridge.log.records.models`.

The JSON Schema in ``schemas/`` is generated from those models; the readers'
open view is derived from them, reads every record they accept and more (a
newer writer's fields and words) and keeps their strict types; the
vocabulary of `acp_bridge.log.records` and the models agree; and the closed
models accept and reject what the schema does.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
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
def test_the_open_view_is_derived_from_the_closed_models(record_type: str) -> None:
    """The same fields, required alike; only the models differ (open, and opened types)."""
    closed = records_by_type()[record_type]
    read = record_models.model_for(record_type)
    assert read is record_models.open_model(closed)
    assert read.model_config.get("extra") == "allow"
    required = {name: field.is_required() for name, field in read.model_fields.items()}
    assert required == {name: field.is_required() for name, field in closed.model_fields.items()}


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


# -- the open view reads what the closed models accept, and more -------------

FIXTURE = Path(__file__).parent / "fixtures" / "log-v1.jsonl"
_ENV = {"v": 1, "seq": 0, "at": 1.5}
# One record of each type that the realistic log and the fixture lack.
_MORE: list[Record] = [
    {**_ENV, "turn": 0, "step": 0, "type": "session/mode", "mode": "ask", "via": "set_mode"},
    {
        **_ENV,
        **{"turn": 0, "step": 0, "type": "permission/rule"},
        **{"tool": "t", "decision": "allow_always"},
    },
    {
        **_ENV,
        **{"turn": 0, "step": 0, "type": "mcp/server", "name": "srv", "status": "connected"},
        "tools": [{"name": "mcp__srv__a", "tool": "a", "schema": "h1"}],
    },
    {
        **_ENV,
        **{"turn": 0, "step": 0, "type": "session/system_prompt", "mode": "append"},
        "content": [{"type": "text", "text": "Be brief."}],
    },
    {**_ENV, "turn": 1, "step": 0, "type": "command/answer", "text": "Done."},
    {
        **_ENV,
        **{"turn": 1, "step": 1, "type": "agent/internal-error"},
        "error": {"kind": "internal", "message": "boom", "exception": "KeyError"},
    },
    {
        **_ENV,
        **{"turn": 1, "step": 0, "type": "compaction", "compaction_id": "c1", "attempt": "a9"},
        **{"status": "completed", "trigger": "auto", "summary": "S", "kept_from": 3},
        **{"pinned": [2], "replaced": 4, "tokens_after": 10},
        "usage": {"input_tokens": 9, "output_tokens": 1},
    },
    {
        **_ENV,
        **{"turn": 1, "step": 0, "type": "compaction", "compaction_id": "c2", "attempt": "a8"},
        **{"status": "failed", "trigger": "overflow"},
        "error": {"kind": "http", "message": "no"},
    },
    {
        **_ENV,
        **{"turn": 1, "step": 0, "type": "user/message"},
        "content": [{"type": "resource", "uri": "file:///a", "blob": "AA==", "mimeType": "x/y"}],
    },
]


def _seed_records() -> list[Record]:
    """Valid records of every type (the closed models accept each)."""
    fixture = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    seeds = [*realistic_log(), *fixture, *_MORE]
    assert {record["type"] for record in seeds} == records.RECORD_TYPES
    assert all(_model_accepts(record) for record in seeds)
    return seeds


def _read_accepts(record: Record) -> bool:
    model = record_models.model_for(record["type"])
    assert model is not None
    try:
        model.model_validate(copy.deepcopy(record))
    except ValidationError:
        return False
    return True


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) of a scalar inside a record, and every object (path, dict)."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    if isinstance(value, dict):
        yield path, value
    for key, item in items:
        if isinstance(item, dict | list):
            yield from _leaves(item, (*path, key))
        else:
            yield (*path, key), item


def _with(record: Record, path: tuple[Any, ...], value: Any) -> Record:
    out = copy.deepcopy(record)
    parent = out
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return out


def test_the_open_view_reads_every_record_the_closed_models_accept() -> None:
    for record in _seed_records():
        for mutant in [record, *_mutants(record)]:
            if _model_accepts(mutant):
                assert _read_accepts(mutant), json.dumps(mutant)


def test_the_open_view_reads_a_newer_writers_fields_and_words() -> None:
    """An extra field in any object, and a new word for any string (a stop reason,
    an outcome, a block or delta kind...), is read; the closed models refuse them."""
    new_words: set[Any] = set()
    for record in _seed_records():
        for path, value in _leaves(record):
            if isinstance(value, dict):
                mutant = _with(record, path, {**value, "added_later": [1]}) if path else record
                assert _read_accepts(mutant if path else {**record, "added": 1}), path
            elif isinstance(value, str) and path != ("type",):
                mutant = _with(record, path, "a_newer_word")
                assert _read_accepts(mutant), (record["type"], path)
                if not _model_accepts(mutant):
                    new_words.add(path[-1] if isinstance(path[-1], str) else path[-2:])
    assert {"reason", "outcome", "status", "finish", "mode", "via", "decision"} <= new_words
    assert {"type", (0, 1)} & new_words == {"type", (0, 1)}  # a block kind, a delta kind


def test_the_open_view_keeps_the_strict_types() -> None:
    """A value of another JSON kind, or out of bounds, is refused wherever the schema
    refuses it: an integer is never a string, a float or a boolean, a number never a
    string, a count never negative, an id never empty."""
    wrong: dict[type, tuple[Any, ...]] = {
        int: ("1", 1.5, True, [], {}, -1),
        float: ("1.5", True, [], {}, -1.0),
        bool: ("true", 1, [], {}),
        str: (1, True, [], {}, ""),
    }
    refused = 0
    for record in _seed_records():
        for path, value in _leaves(record):
            # ``type`` and ``v`` are the reader's (`model_for`, `upcast`), not a model's.
            for other in wrong.get(type(value), ()) if path not in {("type",), ("v",)} else ():
                mutant = _with(record, path, other)
                if not EVENT_LOG_VALIDATOR.is_valid(mutant):
                    refused += 1
                    assert not _read_accepts(mutant), (record["type"], path, other)
    assert refused > 1000


def test_a_block_needs_only_its_type() -> None:
    """The derivation drops a block it cannot use; its known fields are still typed."""
    message = next(r for r in realistic_log() if r["type"] == "user/message")
    for block, readable in [
        ({"type": "audio", "data": "AA=="}, True),
        ({"type": "text"}, True),
        ({"type": "tool_call", "id": "c", "name": "n", "input": {}}, True),
        ({"text": "no type"}, False),
        ({"type": "text", "text": 1}, False),
        ({"type": "image", "data": "AA==", "mimeType": 5}, False),
    ]:
        assert _read_accepts({**message, "content": [block]}) == readable, block
