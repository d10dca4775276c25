"""Generate ``schemas/script.schema.json`` from the script format's models.

``python -m acp_bridge.providers.script_schema`` rewrites the file; ``--check``
exits 1 when the committed file differs from what the models say (a test
does the same).  The models in `acp_bridge.providers.script_format` are the
only definition of the format: edit them, then regenerate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from acp_bridge.providers.script_format import Script
from acp_bridge.providers.script_rules import SCRIPT_SCHEMA_FILE
from acp_bridge.schema_file import schema_file_main

__all__ = ["SCHEMA_PATH", "build_script_schema", "main", "render"]

SCHEMA_PATH = Path(SCRIPT_SCHEMA_FILE)


class _ScriptSchema(GenerateJsonSchema):
    """Draft 2020-12, without the titles pydantic makes up from field names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def build_script_schema() -> dict[str, Any]:
    """The JSON Schema of a script, as generated from the models."""
    body = Script.model_json_schema(schema_generator=_ScriptSchema, mode="validation")
    for definition in body.get("$defs", {}).values():
        definition.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:acp-bridge:schemas:script",
        "$comment": "Generated from acp_bridge/providers/script_format.py by "
        "python -m acp_bridge.providers.script_schema; do not edit.",
        **body,
    }


def render() -> str:
    """The schema file's text."""
    return json.dumps(build_script_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return schema_file_main(
        render, SCHEMA_PATH, module=__spec__.name, description=__doc__.splitlines()[0], argv=argv
    )


if __name__ == "__main__":
    sys.exit(main())
