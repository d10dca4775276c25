"""The script format's rules that need no models: its error, the rules across events
(which the models' validators and the quick check of `acp_bridge.providers.script_check`
both apply), and reading a script file.

A module of its own so that both of those import it and neither imports the other at
module level (`script_check` builds the models, from `script_format`, only at first use).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Final

__all__ = [
    "BLOCK_NEUTRAL_KINDS",
    "SCRIPT_SCHEMA_FILE",
    "ScriptError",
    "never_ends",
    "order_problem",
    "read_script",
    "repeat_problem",
    "script_to_text",
]


# The JSON Schema generated from the script's models (`acp_bridge.providers.script_schema`).
SCRIPT_SCHEMA_FILE: Final = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas", "script.schema.json"
)


class ScriptError(Exception):
    """A script that cannot be used; the message names the file and the JSON path."""


# -- the rules across events (used by the models' validators too) ---------------------

# The kinds of event that neither open nor end a block.
BLOCK_NEUTRAL_KINDS: Final = ("delay_ms", "stall_ms", "usage", "hang")


def never_ends(kind: str, hang_seconds: float | None = None) -> bool:
    """Whether an event of ``kind`` never lets the next one run (a hang: without seconds)."""
    return kind in ("endless", "error") or (kind == "hang" and hang_seconds is None)


def order_problem(kinds: Sequence[str], endless: Sequence[bool]) -> tuple[str, int] | None:
    """The first problem of a response's events (their kinds, and whether each never
    ends), with the event's index; None if they are in a possible order."""
    open_tool = False  # a tool_call_start is open, so tool_args may follow
    for i, kind in enumerate(kinds):
        if i and endless[i - 1]:
            return "unreachable: the event before it never ends", i
        if kind == "tool_args" and not open_tool:
            return "tool_args must follow a tool_call_start", i
        if kind == "tool_call_start":
            open_tool = True
        elif kind != "tool_args" and kind not in BLOCK_NEUTRAL_KINDS:
            open_tool = False
    return None


def repeat_problem(when_exhausted: str, responses: int) -> str | None:
    """Why ``when_exhausted`` cannot work with this many responses, or None."""
    if when_exhausted != "error" and not responses:
        return f"{when_exhausted!r} needs a response"
    return None


# -- reading -------------------------------------------------------------------------


def read_script(path: str | os.PathLike[str]) -> tuple[str, str, object]:
    """A script file's name, text and decoded JSON; raise `ScriptError` if unreadable."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ScriptError(f"{source}: cannot read script: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{source}: not UTF-8 text: {exc.reason}") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ScriptError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise ScriptError(f"{source}: invalid JSON: {exc}") from None
    return source, text, data


def script_to_text(data: object, source: str) -> str:
    """Decoded JSON as text again; raise `ScriptError` if it is not JSON data."""
    try:
        return json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"{source}: not JSON data: {exc}") from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")
