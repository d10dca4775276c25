"""Generate ``schemas/event-log.schema.json`` from `acp_bridge.log.records.models`.

``python -m acp_bridge.log.schema_gen`` rewrites the file; ``--check`` exits 1
when the committed file differs from what the models say (a test does the
same).  The models are the only definition of the records: edit them, then
regenerate.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema

from ..schema_file import schema_file_main
from .records.models import RECORDS, Level, RecordBase, record_type_of

__all__ = ["SCHEMA_PATH", "build_event_log_schema", "main", "render"]

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "event-log.schema.json"

# The ``turn`` and ``step`` a record of each level may have.
LEVELS: Final[dict[Level, dict[str, Any]]] = {
    "session": {"properties": {"turn": {"const": 0}, "step": {"const": 0}}},
    "turn": {"properties": {"turn": {"minimum": 1}, "step": {"const": 0}}},
    "step": {"properties": {"turn": {"minimum": 1}, "step": {"minimum": 1}}},
    "in_turn": {"properties": {"turn": {"minimum": 1}}},
}
_ENVELOPE: Final = ("v", "seq", "at", "type", "turn", "step")


class _Generator(GenerateJsonSchema):
    """Draft 2020-12, without the titles pydantic makes up from field names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _clean(node: Any, *, names: bool = False) -> Any:
    """Drop pydantic's titles and defaults (they do not validate) and rename refs."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if not names and key in ("title", "default"):
            continue
        if not names and key == "$ref":
            out[key] = "#/$defs/" + _snake(value.rsplit("/", 1)[1])
        else:
            out[key] = _clean(value, names=not names and key in ("properties", "$defs"))
    return out


def build_event_log_schema() -> dict[str, Any]:
    """The JSON Schema of one record, as generated from the models."""
    everything: list[type[BaseModel]] = [RecordBase, *RECORDS]
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (model, "validation") for model in everything
    ]
    _, body = models_json_schema(models, schema_generator=_Generator)
    defs: dict[str, Any] = _clean(body["$defs"], names=True)
    defs = {_snake(name): schema for name, schema in sorted(defs.items())}
    dispatch = []
    for model in RECORDS:
        name = _snake(model.__name__)
        definition = defs[name]
        definition["allOf"] = [
            {"$ref": f"#/$defs/{model.level}_level"},
            *(
                {
                    "if": {"properties": {rule.field: {"const": rule.value}}},
                    "then": {"required": list(rule.required)},
                }
                for rule in model.when
            ),
        ]
        for record_type in record_type_of(model):
            dispatch.append(
                {
                    "if": {"properties": {"type": {"const": record_type}}},
                    "then": {"$ref": f"#/$defs/{name}"},
                }
            )
    envelope = defs["record_base"]["properties"]
    del defs["record_base"]
    levels = {f"{level}_level": schema for level, schema in LEVELS.items()}
    types = [record_type for model in RECORDS for record_type in record_type_of(model)]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:acp-bridge:schemas:event-log",
        "$comment": "Generated from acp_bridge/log/records/models.py by "
        "python -m acp_bridge.log.schema_gen; do not edit.",
        "title": "acp-bridge event log record (format version 1)",
        "description": "One line of a session log file: the envelope fields v, seq, at, type, "
        "turn and step, plus the fields of its type (records are closed). See "
        "acp_bridge/log/records/__init__.py for the meaning of each record. Content blocks "
        "that come from the editor (text, resource_link, resource, image) may carry extra ACP "
        "fields such as annotations or _meta.",
        "type": "object",
        "required": list(_ENVELOPE),
        "properties": {**envelope, "type": {"enum": types}},
        "allOf": dispatch,
        "$defs": {**levels, **defs},
    }


def render() -> str:
    """The schema file's text."""
    return json.dumps(build_event_log_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return schema_file_main(
        render, SCHEMA_PATH, module=__spec__.name, description=__doc__.splitlines()[0], argv=argv
    )


if __name__ == "__main__":
    sys.exit(main())
