"""The keyless provider's script format: parsing, validation and loading.

A script is a JSON object, validated by ``schemas/script.schema.json``::

    {
      "description": "free text (optional)",
      "responses": [RESPONSE, ...],       one per model request, in order
      "when_exhausted": "error",          or "repeat_last", "repeat_all"
      "chunk_delay_ms": 0                 default pause before each chunk
    }
    RESPONSE = {"events": [EVENT, ...], "finish": "end_turn"}

``finish`` is optional: it defaults to ``tool_use`` when the response has a
complete tool call and to ``end_turn`` otherwise.  After the last response,
``when_exhausted`` decides: ``error`` fails the request with a `ProviderError`
("script exhausted"), ``repeat_last`` replays the last response,
``repeat_all`` starts the list again.

Each EVENT has exactly one kind key, plus that kind's options:

``{"text": "...", "chunk_size": 4, "chunk_delay_ms": 20}``
    Answer text.  Split into chunks of ``chunk_size`` characters (default:
    one chunk).  ``chunk_delay_ms`` overrides the script default.
``{"reasoning": "...", ...}``
    Reasoning text, same options.
``{"tool_call": {"id", "name", "arguments", "chunks", "chunk_delay_ms"}}``
    A complete tool call: start, the arguments in ``chunks`` near-equal pieces
    (default 1), block end.  ``arguments`` is an object (sent as compact JSON,
    default ``{}``) or a string sent verbatim, which may be invalid JSON to
    script a provider protocol error.
``{"tool_call_start": {"id", "name"}}`` then ``{"tool_args": "partial json"}``
    A tool call streamed piece by piece, closed by the next block or the end
    of the response; follow it with a hang to script a half-streamed call.
``{"usage": {"input_tokens", "output_tokens", "context_window"}}``
    A usage report at this point of the stream.
``{"delay_ms": 50}`` / ``{"stall_ms": 5000}``
    A cancellable pause.  Both behave the same; ``stall_ms`` says that the
    pause is meant to trip the loop's idle timeout.
``{"hang": true}``
    Wait until cancelled.  ``{"hang": {"seconds": 2}}`` waits at most that
    long; ``{"hang": {"ignore_cancel": true, "seconds": 30}}`` is a wedged
    provider: the wait is shielded from cancellation (``seconds`` required).
``{"endless": {"text": "tok ", "delay_ms": 0}}``
    Stream the chunk forever, until cancelled (``delay_ms`` defaults to the
    script's ``chunk_delay_ms``).
``{"error": {"message", "kind", "status", "retryable", "request_id"}}``
    Fail the request here with a `ProviderError` (``kind`` defaults to
    ``"scripted"``, ``retryable`` to false).
``{"report": ["message_count", ...]}``
    Answer text with facts about the request received, one ``name: value``
    line per fact, values as JSON: ``message_count``, ``last_user_text``,
    ``last_assistant_text``, ``last_assistant_reasoning``,
    ``last_assistant_interrupted``, ``tool_results`` (see
    `acp_bridge.providers.scripted`).

Blocks: consecutive text-like events (text, report, endless) share one block
index, as do consecutive reasoning events; any change of kind, and every tool
call, opens the next index and ends the previous block.

Events after one that never ends (``hang`` without ``seconds``, ``endless``,
``error``) are unreachable and rejected, as is a ``tool_args`` that does not
follow a ``tool_call_start``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from acp_bridge.providers.base import FinishReason, Usage

if TYPE_CHECKING:
    from jsonschema import ValidationError

__all__ = [
    "EVENT_KINDS",
    "REPORT_FACTS",
    "DelayStep",
    "EndlessStep",
    "ErrorStep",
    "HangStep",
    "ReportStep",
    "Script",
    "ScriptError",
    "ScriptResponse",
    "StallStep",
    "Step",
    "TextStep",
    "ToolArgsStep",
    "ToolCallStartStep",
    "ToolCallStep",
    "UsageStep",
    "WhenExhausted",
    "load_script",
    "parse_script",
    "script_schema",
]

WhenExhausted: TypeAlias = Literal["error", "repeat_last", "repeat_all"]

EVENT_KINDS: Final = (
    "text",
    "reasoning",
    "delay_ms",
    "tool_call",
    "tool_call_start",
    "tool_args",
    "usage",
    "hang",
    "endless",
    "stall_ms",
    "error",
    "report",
)
# Options that sit next to the kind key, per kind.
_EVENT_OPTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "text": ("chunk_size", "chunk_delay_ms"),
    "reasoning": ("chunk_size", "chunk_delay_ms"),
}
REPORT_FACTS: Final = (
    "message_count",
    "last_user_text",
    "last_assistant_text",
    "last_assistant_reasoning",
    "last_assistant_interrupted",
    "tool_results",
)


class ScriptError(Exception):
    """A script that cannot be used; the message names the file and the JSON path."""


@dataclass(frozen=True, slots=True)
class TextStep:
    kind: Literal["text", "reasoning"]
    text: str
    chunk_size: int | None = None
    chunk_delay_ms: float | None = None


@dataclass(frozen=True, slots=True)
class DelayStep:
    ms: float


@dataclass(frozen=True, slots=True)
class StallStep:
    ms: float


@dataclass(frozen=True, slots=True)
class ToolCallStep:
    id: str
    name: str
    arguments: str
    chunks: int = 1
    chunk_delay_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ToolCallStartStep:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolArgsStep:
    args: str


@dataclass(frozen=True, slots=True)
class UsageStep:
    usage: Usage


@dataclass(frozen=True, slots=True)
class HangStep:
    seconds: float | None = None  # None: until cancelled
    ignore_cancel: bool = False


@dataclass(frozen=True, slots=True)
class EndlessStep:
    text: str
    delay_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ErrorStep:
    message: str
    kind: str = "scripted"
    status: int | None = None
    retryable: bool = False
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReportStep:
    facts: tuple[str, ...]


Step: TypeAlias = (
    TextStep
    | DelayStep
    | StallStep
    | ToolCallStep
    | ToolCallStartStep
    | ToolArgsStep
    | UsageStep
    | HangStep
    | EndlessStep
    | ErrorStep
    | ReportStep
)


@dataclass(frozen=True, slots=True)
class ScriptResponse:
    steps: tuple[Step, ...]
    finish: FinishReason


@dataclass(frozen=True, slots=True)
class Script:
    responses: tuple[ScriptResponse, ...]
    when_exhausted: WhenExhausted = "error"
    chunk_delay_ms: float = 0
    description: str | None = None
    source: str = "<script>"


# Steps that neither open nor end a block.
_BLOCK_NEUTRAL: Final = (DelayStep, StallStep, UsageStep, HangStep)


# -- loading -------------------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read, validate and parse a script file; raise `ScriptError` if it is unusable."""
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
    return parse_script(data, source)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


@cache
def script_schema() -> dict[str, Any]:
    """The script JSON Schema (draft 2020-12)."""
    resource = files("acp_bridge") / "schemas" / "script.schema.json"
    return cast(dict[str, Any], json.loads(resource.read_text(encoding="utf-8")))


def parse_script(data: object, source: str = "<script>") -> Script:
    """Validate already decoded JSON and build a `Script`; raise `ScriptError`."""
    from jsonschema import Draft202012Validator

    errors = list(Draft202012Validator(script_schema()).iter_errors(data))
    if errors:
        raise ScriptError(f"{source}: {_describe(errors, data)}")
    doc = cast(dict[str, Any], data)
    responses = tuple(
        _parse_response(r, f"responses[{i}]", source) for i, r in enumerate(doc["responses"])
    )
    when_exhausted = cast(WhenExhausted, doc.get("when_exhausted", "error"))
    if when_exhausted != "error" and not responses:
        raise ScriptError(f"{source}: when_exhausted: {when_exhausted!r} needs a response")
    return Script(
        responses=responses,
        when_exhausted=when_exhausted,
        chunk_delay_ms=doc.get("chunk_delay_ms", 0),
        description=doc.get("description"),
        source=source,
    )


def _parse_response(raw: dict[str, Any], where: str, source: str) -> ScriptResponse:
    steps: list[Step] = []
    open_tool = False  # a tool_call_start is open, so tool_args may follow
    for i, event in enumerate(raw["events"]):
        if steps and _never_ends(steps[-1]):
            raise ScriptError(
                f"{source}: {where}.events[{i}]: unreachable: the event before it never ends"
            )
        step = _parse_event(event)
        if isinstance(step, ToolArgsStep) and not open_tool:
            raise ScriptError(
                f"{source}: {where}.events[{i}]: tool_args must follow a tool_call_start"
            )
        if isinstance(step, ToolCallStartStep):
            open_tool = True
        elif not isinstance(step, ToolArgsStep) and not isinstance(step, _BLOCK_NEUTRAL):
            open_tool = False
        steps.append(step)
    finish: FinishReason = raw.get("finish") or (
        "tool_use" if _has_complete_tool_call(steps) else "end_turn"
    )
    return ScriptResponse(tuple(steps), finish)


def _parse_event(event: dict[str, Any]) -> Step:
    kind = next(k for k in EVENT_KINDS if k in event)
    value = event[kind]
    if kind == "text" or kind == "reasoning":
        return TextStep(kind, value, event.get("chunk_size"), event.get("chunk_delay_ms"))
    if kind == "delay_ms":
        return DelayStep(value)
    if kind == "stall_ms":
        return StallStep(value)
    if kind == "tool_call":
        arguments = value.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        return ToolCallStep(
            value["id"],
            value["name"],
            arguments,
            value.get("chunks", 1),
            value.get("chunk_delay_ms"),
        )
    if kind == "tool_call_start":
        return ToolCallStartStep(value["id"], value["name"])
    if kind == "tool_args":
        return ToolArgsStep(value)
    if kind == "usage":
        return UsageStep(
            Usage(
                value.get("input_tokens", 0),
                value.get("output_tokens", 0),
                value.get("context_window"),
            )
        )
    if kind == "hang":
        if value is True:
            return HangStep()
        return HangStep(value.get("seconds"), value.get("ignore_cancel", False))
    if kind == "endless":
        return EndlessStep(value["text"], value.get("delay_ms"))
    if kind == "error":
        return ErrorStep(
            value["message"],
            value.get("kind", "scripted"),
            value.get("status"),
            value.get("retryable", False),
            value.get("request_id"),
        )
    return ReportStep(tuple(value))


def _never_ends(step: Step) -> bool:
    return isinstance(step, EndlessStep | ErrorStep) or (
        isinstance(step, HangStep) and step.seconds is None
    )


def _has_complete_tool_call(steps: Iterable[Step]) -> bool:
    """Whether a tool call in these steps has arguments that parse as an object (or none)."""
    args: list[str] | None = None  # fragments of the open tool_call_start
    for step in steps:
        if isinstance(step, ToolArgsStep) and args is not None:
            args.append(step.args)
        elif isinstance(step, _BLOCK_NEUTRAL):
            continue
        else:
            if args is not None and _is_object_or_empty("".join(args)):
                return True
            args = [] if isinstance(step, ToolCallStartStep) else None
            if isinstance(step, ToolCallStep) and _is_object_or_empty(step.arguments):
                return True
    return args is not None and _is_object_or_empty("".join(args))


def _is_object_or_empty(args: str) -> bool:
    if not args.strip():
        return True
    try:
        return isinstance(json.loads(args), dict)
    except ValueError:
        return False


# -- error messages ------------------------------------------------------------


def _describe(errors: list[ValidationError], data: object) -> str:
    """One clear line for the first problem (in document order), and a count of the rest."""
    by_path: dict[tuple[str | int, ...], ValidationError] = {}
    for error in errors:
        by_path.setdefault(tuple(error.absolute_path), error)
    paths = sorted(
        by_path, key=lambda p: [(0, k, "") if isinstance(k, int) else (1, 0, k) for k in p]
    )
    first = paths[0]
    message = _event_message(first, _at(data, first)) or by_path[first].message
    text = f"{_json_path(first)}: {message}" if first else message
    if len(paths) > 1:
        text += f" (and {len(paths) - 1} more problem{'s' if len(paths) > 2 else ''})"
    return text


def _event_message(path: tuple[str | int, ...], event: object) -> str | None:
    """A readable message for a malformed event object (path ``responses[i].events[j]``)."""
    if len(path) != 4 or path[0] != "responses" or path[2] != "events":
        return None
    expected = ", ".join(EVENT_KINDS)
    if not isinstance(event, dict):
        return (
            f"{json.dumps(event)} is not a valid event (expected an object with one of: {expected})"
        )
    kinds = [k for k in event if k in EVENT_KINDS]
    if len(kinds) > 1:
        return f"an event has exactly one kind, this one has {len(kinds)}: {', '.join(kinds)}"
    if not kinds:
        all_options = {o for opts in _EVENT_OPTIONS.values() for o in opts}
        unknown = [k for k in event if k not in all_options]
        if unknown:
            return f"{unknown[0]!r} is not a valid event (expected one of: {expected})"
        return f"an event needs one of: {expected}"
    options = _EVENT_OPTIONS.get(kinds[0], ())
    unknown = [k for k in event if k not in EVENT_KINDS and k not in options]
    if unknown:
        allowed = f"options: {', '.join(options)}" if options else "no options"
        return f"{unknown[0]!r} is not an option of a {kinds[0]} event ({allowed})"
    return None


def _at(data: object, path: tuple[str | int, ...]) -> object:
    for key in path:
        data = data[key]  # type: ignore[index]
    return data


def _json_path(path: Iterable[str | int]) -> str:
    out = ""
    for key in path:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else key
    return out
