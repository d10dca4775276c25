"""Reading a script, and a quick check that lets a valid one skip pydantic at start-up.

The script format is defined once, by the models of
`acp_bridge.providers.script_format`; building them (pydantic's import, the
models' validators, the plugin look-up) costs more than the rest of the
agent's start-up.  So `prepare_file` and `prepare_data` read the script and
check it here, without pydantic, against the JSON Schema generated from those
models (``schemas/script.schema.json``, kept in step by a test) plus the rules
across events that a schema cannot say (`order_problem`, `repeat_problem`,
which the models' validators call too).  A script that passes is a
`PreparedScript` whose models are built later, at the first model request
(in a worker thread: `acp_bridge.providers.scripted`).

The check only ever says "valid" or "not sure": for anything it does not
pass (an invalid script, or a construct it does not know) the models
validate at once, as before, so an invalid script is still the error of
``session/new`` with the models' own message.  It is stricter than the models
where the two JSON readers might differ (escaped surrogates, say), never
looser; a property test holds it to that.

Nothing here imports pydantic; the rules and the reading are in
`acp_bridge.providers.script_rules`, which the models import too; this module
imports the models only in `PreparedScript.get`, at first use.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from acp_bridge.providers.script_rules import (
    SCRIPT_SCHEMA_FILE,
    ScriptError,
    never_ends,
    order_problem,
    read_script,
    repeat_problem,
    script_to_text,
)

if TYPE_CHECKING:
    from acp_bridge.providers.script_format import Script

__all__ = [
    "PreparedScript",
    "ScriptError",
    "passes",
    "prepare_data",
    "prepare_file",
]


# -- a script read and checked -------------------------------------------------------


class PreparedScript:
    """A script whose models are built on first use (`get`), once, in any thread."""

    def __init__(self, text: str, data: object, source: str) -> None:
        self.text = text
        self.data = data
        self.source = source
        self._lock = threading.Lock()
        self._script: Script | None = None
        self._error: ScriptError | None = None

    @property
    def built(self) -> bool:
        return self._script is not None or self._error is not None

    def get(self) -> Script:
        """The validated `Script`; raise `ScriptError` if the models refuse it."""
        with self._lock:
            if self._script is None and self._error is None:
                from acp_bridge.providers.script_format import validate

                try:
                    self._script = validate(self.text, self.data, self.source)
                except ScriptError as exc:
                    self._error = exc
            if self._error is not None:
                raise ScriptError(str(self._error))
            assert self._script is not None
            return self._script


def prepare_file(path: str | os.PathLike[str]) -> PreparedScript:
    """Read a script file; validate it now unless the quick check passes it.

    Raises `ScriptError` for a script that cannot be used."""
    return _prepare(*read_script(path))


def prepare_data(data: object, source: str = "<script>") -> PreparedScript:
    """`prepare_file` for already decoded JSON."""
    return _prepare(source, script_to_text(data, source), data)


def _prepare(source: str, text: str, data: object) -> PreparedScript:
    script = PreparedScript(text, data, source)
    if not passes(text, data):
        script.get()  # the models' verdict, now: raises ScriptError with their message
    return script


# -- the quick check -----------------------------------------------------------------


class _Unsure(Exception):
    """A construct the check does not know: leave the verdict to the models."""


_schema: dict[str, Any] | None = None
# Annotations only: they never make a value invalid.
_IGNORED: Final = frozenset(
    ("$schema", "$id", "$comment", "$defs", "title", "description", "default", "then", "else")
)


def passes(text: str, data: object) -> bool:
    """True if the script is certainly valid (the models would accept it); False if
    it is not, or if the check cannot tell."""
    if "\\u" in text and _has_escaped_surrogate(text):
        return False  # the two JSON readers may differ on these: the models decide
    try:
        schema = _load_schema()
        if not _valid(data, schema, schema):
            return False
        return _rules_pass(data, schema)
    except (_Unsure, OSError, ValueError, RecursionError):
        return False


def _load_schema() -> dict[str, Any]:
    global _schema
    if _schema is None:
        with open(SCRIPT_SCHEMA_FILE, encoding="utf-8") as f:
            loaded = json.load(f)
        if not isinstance(loaded, dict):
            raise _Unsure("the schema is not an object")
        _schema = loaded
    return _schema


def _has_escaped_surrogate(text: str) -> bool:
    lowered = text.lower()
    return any(f"\\ud{c}" in lowered for c in "89abcdef")


def _valid(value: object, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether ``value`` is valid against ``schema`` (the keywords the script's schema uses)."""
    for key, want in schema.items():
        if key in _IGNORED:
            continue
        check = _KEYWORDS.get(key)
        if check is None:
            raise _Unsure(key)
        if not check(value, want, schema, root):
            return False
    return True


_Check: TypeAlias = Callable[[Any, Any, dict[str, Any], dict[str, Any]], bool]


def _additional(value: Any, want: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    if want is not False:
        raise _Unsure("additionalProperties")
    known = schema.get("properties", {})
    return not isinstance(value, dict) or all(name in known for name in value)


def _if(value: Any, want: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    branch = "then" if _valid(value, want, root) else "else"
    return branch not in schema or _valid(value, schema[branch], root)


_KEYWORDS: Final[dict[str, _Check]] = {
    "$ref": lambda v, want, s, root: _valid(v, _resolve(want, root), root),
    "type": lambda v, want, s, root: _has_type(v, want),
    "properties": lambda v, want, s, root: (
        not isinstance(v, dict)
        or all(name not in v or _valid(v[name], sub, root) for name, sub in want.items())
    ),
    "required": lambda v, want, s, root: not isinstance(v, dict) or all(n in v for n in want),
    "additionalProperties": _additional,
    "items": lambda v, want, s, root: (
        not isinstance(v, list) or all(_valid(item, want, root) for item in v)
    ),
    "minItems": lambda v, want, s, root: not isinstance(v, list) or len(v) >= want,
    "uniqueItems": lambda v, want, s, root: not (want and isinstance(v, list)) or _unique(v),
    "minLength": lambda v, want, s, root: not isinstance(v, str) or len(v) >= want,
    "minimum": lambda v, want, s, root: not _is_number(v) or v >= want,
    "enum": lambda v, want, s, root: any(_same(v, option) for option in want),
    "const": lambda v, want, s, root: _same(v, want),
    "anyOf": lambda v, want, s, root: any(_valid(v, sub, root) for sub in want),
    "oneOf": lambda v, want, s, root: sum(1 for sub in want if _valid(v, sub, root)) == 1,
    "if": _if,
}


def _resolve(ref: object, root: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        raise _Unsure(f"$ref {ref!r}")
    found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
    if not isinstance(found, dict):
        raise _Unsure(f"$ref {ref!r}")
    return found


def _has_type(value: object, want: object) -> bool:
    if isinstance(want, list):
        return any(_has_type(value, one) for one in want)
    if want == "object":
        return isinstance(value, dict)
    if want == "array":
        return isinstance(value, list)
    if want == "string":
        return isinstance(value, str)
    if want == "integer":
        return type(value) is int
    if want == "number":
        return _is_number(value)
    if want == "boolean":
        return isinstance(value, bool)
    if want == "null":
        return value is None
    raise _Unsure(f"type {want!r}")


def _is_number(value: object) -> bool:
    if type(value) is int:
        return True
    return type(value) is float and math.isfinite(value)


def _same(value: object, option: object) -> bool:
    # JSON equality: True is not 1, 1 is 1.0 (no such option in the script's schema).
    return type(value) is type(option) and value == option


def _unique(items: list[Any]) -> bool:
    if not all(isinstance(item, str) for item in items):
        raise _Unsure("uniqueItems of non-strings")
    return len(set(items)) == len(items)


def _rules_pass(data: Any, schema: dict[str, Any]) -> bool:
    """The models' rules across events and fields, on a script the schema accepts."""
    kinds = _event_kinds(schema)
    if repeat_problem(data.get("when_exhausted", "error"), len(data["responses"])):
        return False
    responses = list(data["responses"])
    if data.get("compaction") is not None:
        responses.append(data["compaction"])
    for response in responses:
        events = response["events"]
        names = [_kind_of(event, kinds) for event in events]
        endless = [
            never_ends(kind, _hang_seconds(event[kind]) if kind == "hang" else None)
            for kind, event in zip(names, events, strict=True)
        ]
        if order_problem(names, endless) is not None:
            return False
    return True


def _event_kinds(schema: dict[str, Any]) -> frozenset[str]:
    """The kind keys of the events: the one required key of each event's definition."""
    try:
        choices = schema["$defs"]["ScriptResponse"]["properties"]["events"]["items"]["oneOf"]
        kinds = [_resolve(choice["$ref"], schema)["required"] for choice in choices]
    except (KeyError, TypeError) as exc:
        raise _Unsure("the events' definitions") from exc
    if not all(isinstance(required, list) and len(required) == 1 for required in kinds):
        raise _Unsure("an event with more than one required key")
    return frozenset(required[0] for required in kinds)


def _kind_of(event: dict[str, Any], kinds: frozenset[str]) -> str:
    found = [key for key in event if key in kinds]
    if len(found) != 1:
        raise _Unsure("an event without exactly one kind")
    return found[0]


def _hang_seconds(hang: object) -> float | None:
    if hang is True:
        return None
    if isinstance(hang, dict):
        seconds: float | None = hang.get("seconds")  # a number or null: the schema passed
        return seconds
    raise _Unsure("a hang that is neither true nor an object")
