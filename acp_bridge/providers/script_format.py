"""The keyless provider's script format: its one definition, and loading.

A script is a JSON object; the pydantic models below are its definition.
They validate scripts, and ``schemas/script.schema.json`` is generated from
them (``python -m acp_bridge.providers.script_schema``)::

    {
      "description": "free text (optional)",
      "responses": [RESPONSE, ...],       one per model request, in order
      "when_exhausted": "error",          or "repeat_last", "repeat_all"
      "chunk_delay_ms": 0,                default pause before each chunk
      "compaction": RESPONSE              the answer to every summary request
    }
    RESPONSE = {"events": [EVENT, ...], "finish": "end_turn"}

Each EVENT is an object with exactly one kind key (the first field of one
of the event models: ``text``, ``reasoning``, ``delay_ms``, ``tool_call``,
``tool_call_start``, ``tool_args``, ``usage``, ``hang``, ``endless``,
``stall_ms``, ``error``, ``report``), plus the options of that kind; each
model's docstring says what the event does.  An option given as ``null`` is
the same as leaving it out.

Blocks: consecutive text-like events (text, report, endless) share one block
index, as do consecutive reasoning events; any change of kind, and every tool
call, opens the next index and ends the previous block.  Events after one
that never ends (``hang`` without ``seconds``, ``endless``, ``error``) are
unreachable and rejected, as is a ``tool_args`` that does not follow a
``tool_call_start``.

`load_script` and `parse_script` raise `ScriptError`, whose message names the
file and the JSON path of the first problem (``responses[1].events[0]: ...``).

Why this module is over 400 lines: it is the script format's one definition,
every event model with its validation and error wording, from which
``schemas/script.schema.json`` is generated; split, the models and the rules
that check them across events would have to be read in two places.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from acp_bridge.providers.base import FinishReason
from acp_bridge.providers.script_rules import (
    BLOCK_NEUTRAL_KINDS,
    ScriptError,
    never_ends,
    order_problem,
    read_script,
    repeat_problem,
    script_to_text,
)

__all__ = [
    "EVENT_KINDS",
    "EVENT_MODELS",
    "EVENT_OPTIONS",
    "REPORT_FACTS",
    "DelayEvent",
    "EndlessEvent",
    "ErrorEvent",
    "Event",
    "HangEvent",
    "ReasoningEvent",
    "ReportEvent",
    "Script",
    "ScriptError",
    "ScriptResponse",
    "StallEvent",
    "TextEvent",
    "ToolArgsEvent",
    "ToolCallEvent",
    "ToolCallStartEvent",
    "UsageEvent",
    "WhenExhausted",
    "load_script",
    "parse_script",
    "validate",
]

WhenExhausted: TypeAlias = Literal["error", "repeat_last", "repeat_all"]
ReportFact: TypeAlias = Literal[
    "message_count",
    "last_user_text",
    "last_assistant_text",
    "last_assistant_reasoning",
    "last_assistant_interrupted",
    "tool_results",
    "first_user_text",
    "tool_names",
]
REPORT_FACTS: Final[tuple[str, ...]] = ReportFact.__args__  # type: ignore[attr-defined]

Ms = Annotated[float, Field(ge=0)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    # Strict: JSON types as written (no "5" for 5); unknown keys are errors.
    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True
    )


def _problem(message: str, *at: str | int) -> PydanticCustomError:
    """A validation error with ``message``, located ``at`` below the failing object."""
    return PydanticCustomError("script", message, {"at": at})


# -- events ------------------------------------------------------------------------


class _Event(_Model):
    kind: ClassVar[str]  # the key that names the event: its first field

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            return
        cls.kind = next(iter(cls.__annotations__))


class _Chunked(_Model):
    chunk_size: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Characters per chunk (default: the whole text in one chunk)."
    )
    chunk_delay_ms: Ms | None = Field(
        None, description="Pause before each chunk but the first (default: the script's)."
    )


class TextEvent(_Event, _Chunked):
    """Answer text, streamed in chunks of ``chunk_size`` characters."""

    kind: ClassVar[str] = "text"
    text: str


class ReasoningEvent(_Event, _Chunked):
    """Reasoning (thinking) text; the same options as text."""

    kind: ClassVar[str] = "reasoning"
    reasoning: str


class DelayEvent(_Event):
    """A cancellable pause, e.g. to pace the stream."""

    delay_ms: Ms

    @property
    def pause_ms(self) -> float:
        return self.delay_ms


class StallEvent(_Event):
    """No events for this long (cancellable): a stall meant to trip the loop's idle timeout."""

    stall_ms: Ms

    @property
    def pause_ms(self) -> float:
        return self.stall_ms


def _object_or_string(value: Any) -> Any:
    if not isinstance(value, dict | str):
        raise _problem(f"{value!r} is not of type 'object' or 'string'")
    return value


class ToolCall(_Model):
    id: NonEmpty
    name: NonEmpty
    arguments: Annotated[
        Any,
        AfterValidator(_object_or_string),
        WithJsonSchema(
            {
                "type": ["object", "string"],
                "description": "An object (sent as compact JSON) or a string sent verbatim, "
                "which may be invalid JSON on purpose. Default {}.",
            }
        ),
    ] = Field(default_factory=dict)
    chunks: Annotated[int, Field(ge=1)] = Field(
        1, description="The arguments are streamed in this many near-equal pieces."
    )
    chunk_delay_ms: Ms | None = None

    def arguments_text(self) -> str:
        """The arguments as streamed: the string as is, an object as compact JSON."""
        args = self.arguments
        if isinstance(args, str):
            return args
        return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


class ToolCallEvent(_Event):
    """A complete tool call: its start, the arguments in ``chunks`` pieces, the block end."""

    tool_call: ToolCall


class ToolCallStart(_Model):
    id: NonEmpty
    name: NonEmpty


class ToolCallStartEvent(_Event):
    """Open a tool call without closing it; ``tool_args`` events stream its arguments.

    The call is closed by the next block or the end of the response; follow
    it with a hang to script a half-streamed call.
    """

    tool_call_start: ToolCallStart


class ToolArgsEvent(_Event):
    """A fragment of the arguments of the tool call opened by the ``tool_call_start`` before."""

    tool_args: str


class UsageReport(_Model):
    input_tokens: Annotated[int, Field(ge=0)] = 0
    output_tokens: Annotated[int, Field(ge=0)] = 0
    context_window: Annotated[int, Field(ge=1)] | None = None


class UsageEvent(_Event):
    """A usage report at this point of the stream."""

    usage: UsageReport


class HangOptions(_Model):
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"required": ["ignore_cancel"], "properties": {"ignore_cancel": {"const": True}}},
            "then": {"required": ["seconds"], "properties": {"seconds": {"type": "number"}}},
        }
    )

    seconds: Ms | None = Field(None, description="Wait at most this long (default: forever).")
    ignore_cancel: bool = Field(
        False,
        description="Shield the wait from cancellation: a wedged provider (needs seconds).",
    )

    @model_validator(mode="after")
    def _bounded_if_shielded(self) -> HangOptions:
        if self.ignore_cancel and self.seconds is None:
            raise _problem("'seconds' is a required property")
        return self


def _hang_form(value: Any) -> str | None:
    if isinstance(value, bool):
        return "=true"
    if isinstance(value, dict | HangOptions):
        return "=options"
    return None


class HangEvent(_Event):
    """Wait: ``true`` until cancelled, or an object with options."""

    hang: Annotated[
        Annotated[Literal[True], Tag("=true")] | Annotated[HangOptions, Tag("=options")],
        Discriminator(
            _hang_form,
            custom_error_type="script",
            custom_error_message="hang is true or an object",
            custom_error_context={"at": ()},
        ),
    ]

    @property
    def seconds(self) -> float | None:
        """How long to wait at most (None: until cancelled)."""
        return None if self.hang is True else self.hang.seconds

    @property
    def ignore_cancel(self) -> bool:
        return self.hang is not True and self.hang.ignore_cancel


class EndlessOptions(_Model):
    text: NonEmpty
    delay_ms: Ms | None = Field(None, description="Default: the script's chunk_delay_ms.")


class EndlessEvent(_Event):
    """Stream the same text chunk forever, until cancelled."""

    endless: EndlessOptions


class ErrorOptions(_Model):
    message: str
    kind: NonEmpty = "scripted"
    status: int | None = None
    retryable: bool = False
    request_id: str | None = None


class ErrorEvent(_Event):
    """Fail the request here with a provider error (before any token if it comes first)."""

    error: ErrorOptions


def _unique(facts: list[str]) -> list[str]:
    if len(set(facts)) != len(facts):
        raise _problem(f"{facts!r} has repeated facts")
    return facts


class ReportEvent(_Event):
    """Answer text stating facts about the request received, one ``name: value`` line each.

    Values are JSON: ``message_count``; ``last_user_text`` (the text blocks of
    the last user message that has any); ``last_assistant_text``,
    ``last_assistant_reasoning`` and ``last_assistant_interrupted`` (of the
    last assistant message; null if none); ``tool_results`` (in the last
    message, ``[{"tool_call_id", "is_error", "text"}]``); ``first_user_text``
    (the text blocks of the first message: after a compaction, its summary);
    ``tool_names`` (the names of the tools the request offers, in order).
    """

    report: Annotated[
        list[ReportFact],
        Field(min_length=1, json_schema_extra={"uniqueItems": True}),
        AfterValidator(_unique),
    ]


EVENT_MODELS: Final[tuple[type[_Event], ...]] = (
    TextEvent,
    ReasoningEvent,
    DelayEvent,
    ToolCallEvent,
    ToolCallStartEvent,
    ToolArgsEvent,
    UsageEvent,
    HangEvent,
    EndlessEvent,
    StallEvent,
    ErrorEvent,
    ReportEvent,
)
EVENT_KINDS: Final = tuple(model.kind for model in EVENT_MODELS)
# The options that may sit next to each kind key.
EVENT_OPTIONS: Final = {
    model.kind: tuple(name for name in model.model_fields if name != model.kind)
    for model in EVENT_MODELS
}


def _event_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        kinds = [key for key in value if key in EVENT_KINDS]
        return f"={kinds[0]}" if len(kinds) == 1 else None
    if isinstance(value, _Event):
        return f"={value.kind}"
    return None


Event = Annotated[
    Annotated[TextEvent, Tag("=text")]
    | Annotated[ReasoningEvent, Tag("=reasoning")]
    | Annotated[DelayEvent, Tag("=delay_ms")]
    | Annotated[ToolCallEvent, Tag("=tool_call")]
    | Annotated[ToolCallStartEvent, Tag("=tool_call_start")]
    | Annotated[ToolArgsEvent, Tag("=tool_args")]
    | Annotated[UsageEvent, Tag("=usage")]
    | Annotated[HangEvent, Tag("=hang")]
    | Annotated[EndlessEvent, Tag("=endless")]
    | Annotated[StallEvent, Tag("=stall_ms")]
    | Annotated[ErrorEvent, Tag("=error")]
    | Annotated[ReportEvent, Tag("=report")],
    Discriminator(
        _event_tag,
        custom_error_type="script_event",
        custom_error_message="not a valid event",
    ),
]
# The events that neither open nor end a block.
_BLOCK_NEUTRAL: Final = tuple(m for m in EVENT_MODELS if m.kind in BLOCK_NEUTRAL_KINDS)


def _never_ends(event: Event) -> bool:
    return never_ends(event.kind, event.seconds if isinstance(event, HangEvent) else None)


# -- responses and scripts -----------------------------------------------------------


class ScriptResponse(_Model):
    """The answer to one model request."""

    events: list[Event]
    finish: FinishReason | None = Field(
        None,
        description="The finish reason sent after the last event. "
        "Default: tool_use if the response has a complete tool call, else end_turn.",
    )

    @model_validator(mode="after")
    def _reachable_and_ordered(self) -> ScriptResponse:
        kinds = [event.kind for event in self.events]
        problem = order_problem(kinds, [_never_ends(event) for event in self.events])
        if problem is not None:
            raise _problem(problem[0], "events", problem[1])
        return self

    @property
    def finish_reason(self) -> FinishReason:
        """``finish``, or its default."""
        if self.finish is not None:
            return self.finish
        return "tool_use" if _has_complete_tool_call(self.events) else "end_turn"


class Script(_Model):
    """Scripted model responses replayed by the keyless provider, one per model request."""

    model_config = ConfigDict(title="acp-bridge keyless provider script")

    description: str | None = Field(None, description="Free text for the reader of the script.")
    responses: list[ScriptResponse] = Field(
        description="One response per model request, consumed in order."
    )
    when_exhausted: WhenExhausted = Field(
        "error",
        description="What a request gets after the last response: a provider error, "
        "the last response again, or the whole list again.",
    )
    chunk_delay_ms: Ms = Field(
        0, description="Default pause before each streamed chunk except the first of a response."
    )
    compaction: ScriptResponse | None = Field(
        default=None,
        description="The answer to every summary request of a compaction (they do not take "
        "a response from 'responses'). Default: a summary made of the user's texts in the "
        "request.",
    )
    _source: str = PrivateAttr("<script>")

    @model_validator(mode="after")
    def _repeats_something(self) -> Script:
        problem = repeat_problem(self.when_exhausted, len(self.responses))
        if problem is not None:
            raise _problem(problem, "when_exhausted")
        return self

    @property
    def source(self) -> str:
        """Where the script came from (a file name, or a label)."""
        return self._source


def _has_complete_tool_call(events: Iterable[Event]) -> bool:
    """Whether a tool call in these events has arguments that parse as an object (or none)."""
    args: list[str] | None = None  # fragments of the open tool_call_start
    for event in events:
        if isinstance(event, ToolArgsEvent) and args is not None:
            args.append(event.tool_args)
        elif isinstance(event, _BLOCK_NEUTRAL):
            continue
        else:
            if args is not None and _is_object_or_empty("".join(args)):
                return True
            args = [] if isinstance(event, ToolCallStartEvent) else None
            if isinstance(event, ToolCallEvent) and _is_object_or_empty(
                event.tool_call.arguments_text()
            ):
                return True
    return args is not None and _is_object_or_empty("".join(args))


def _is_object_or_empty(args: str) -> bool:
    if not args.strip():
        return True
    try:
        return isinstance(json.loads(args), dict)
    except ValueError:
        return False


# -- loading -------------------------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read and validate a script file; raise `ScriptError` if it is unusable."""
    source, text, data = read_script(path)
    return validate(text, data, source)


def parse_script(data: object, source: str = "<script>") -> Script:
    """Validate already decoded JSON and build a `Script`; raise `ScriptError`."""
    return validate(script_to_text(data, source), data, source)


def validate(text: str, data: object, source: str) -> Script:
    """Build a `Script` from a script's text (``data`` is the same, decoded: for
    the error message); raise `ScriptError` naming ``source`` and the JSON path."""
    try:
        script = Script.model_validate_json(text)
    except ValidationError as exc:
        raise ScriptError(f"{source}: {_describe(exc, data)}") from None
    script._source = source
    return script


# -- error messages ------------------------------------------------------------------

Path: TypeAlias = tuple[str | int, ...]
_JSON_TYPES: Final = {
    "string_type": "string",
    "int_type": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "list_type": "array",
    "tuple_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}


def _describe(exc: ValidationError, data: object) -> str:
    """One clear line for the first problem (in document order), and a count of the rest."""
    by_path: dict[Path, str] = {}
    for error in exc.errors(include_url=False):
        path, message = _located(cast(dict[str, Any], error), data)
        by_path.setdefault(path, message)
    paths = sorted(
        by_path, key=lambda p: [(0, k, "") if isinstance(k, int) else (1, 0, k) for k in p]
    )
    first = paths[0]
    text = f"{_json_path(first)}: {by_path[first]}" if first else by_path[first]
    if len(paths) > 1:
        text += f" (and {len(paths) - 1} more problem{'s' if len(paths) > 2 else ''})"
    return text


def _located(error: dict[str, Any], data: object) -> tuple[Path, str]:
    """The JSON path of a pydantic error, in the script's terms, and its message."""
    # Union tags ("=text") are pydantic's, not the script's.
    path: Path = tuple(k for k in error["loc"] if not (isinstance(k, str) and k.startswith("=")))
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if _is_event_path(path[:4]) and (
        kind in ("script_event", "extra_forbidden") and len(path) <= 5
    ):
        path = path[:4]
        return path, _event_message(_at(data, path))
    if kind == "script":
        return path + tuple(ctx.get("at", ())), error["msg"]
    if kind == "missing":
        return path[:-1], f"{path[-1]!r} is a required property"
    if kind == "extra_forbidden":
        return path[:-1], f"{path[-1]!r} is not allowed here"
    if kind in _JSON_TYPES:
        return path, f"{value!r} is not of type {_JSON_TYPES[kind]!r}"
    if kind == "literal_error":
        return path, f"{value!r} is not one of {ctx.get('expected')}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return path, f"{value!r} is less than the minimum of {bound}"
    if kind in ("too_short", "string_too_short"):
        return path, f"{value!r} should be non-empty"
    if kind == "finite_number":
        return path, f"{value!r} is not a finite number"
    return path, str(error["msg"])


def _is_event_path(path: Path) -> bool:
    return len(path) == 4 and path[0] == "responses" and path[2] == "events"


def _event_message(event: object) -> str:
    """A readable message for an event object that is not one event."""
    expected = ", ".join(EVENT_KINDS)
    if not isinstance(event, dict):
        return (
            f"{json.dumps(event)} is not a valid event (expected an object with one of: {expected})"
        )
    kinds = [k for k in event if k in EVENT_KINDS]
    if len(kinds) > 1:
        return f"an event has exactly one kind, this one has {len(kinds)}: {', '.join(kinds)}"
    if not kinds:
        all_options = {o for opts in EVENT_OPTIONS.values() for o in opts}
        unknown = [k for k in event if k not in all_options]
        if unknown:
            return f"{unknown[0]!r} is not a valid event (expected one of: {expected})"
        return f"an event needs one of: {expected}"
    options = EVENT_OPTIONS[kinds[0]]
    unknown = [k for k in event if k not in EVENT_KINDS and k not in options]
    allowed = f"options: {', '.join(options)}" if options else "no options"
    return f"{unknown[0]!r} is not an option of a {kinds[0]} event ({allowed})"


def _at(data: object, path: Sequence[str | int]) -> object:
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
