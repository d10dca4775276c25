"""Every event-log record type, once: closed, typed pydantic models.

These models are the definition of what the bridge writes (the write side):
each record type is one class with the envelope fields, its ``type`` as a
``Literal`` and the fields it may have; nothing else is allowed
(``extra="forbid"``).  ``schemas/event-log.schema.json`` is generated from
them (``python -m acp_bridge.log.schema_gen``), and the closed vocabularies
are the ``Literal`` types of `acp_bridge.log.records` (the package's own
module, which holds the vocabulary the write path needs without pydantic).

The writer does not build these models (the hot path stays on plain dicts and
orjson, and does not import pydantic).  The readers that validate a log use
an open view derived from them by rules (`acp_bridge.log.records.read`:
extra fields allowed, vocabularies read as strings, so a newer log is not
refused), not a second definition.  A test holds `records.RECORD_TYPES` and
the schema file to this module.  The models build their validators on first
use (``defer_build``): a reader that imports them for their fields pays
only for the records it checks.

Why this module is over 400 lines: it is the one definition of every record
type (about 25 small classes and the parts they share); split, the
vocabulary would again live in several places.

Adding a record type: write its class below (its ``type`` Literal, its
``level``, its fields) and add it to `RECORDS` (its open view follows) and
its type to `acp_bridge.log.records.RECORD_TYPES` (the write path's index,
without pydantic); then regenerate the schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from . import (
    AttemptOutcome,
    CompactionStatus,
    CompactionTrigger,
    StepEndReason,
    StreamOutcome,
    ToolCallStatus,
    TurnEndReason,
)

__all__ = [
    "LEVEL_RULES",
    "RECORDS",
    "Level",
    "RecordBase",
    "When",
    "record_type_of",
    "records_by_type",
]

# Where a record sits: ``session`` (turn 0, step 0), ``turn`` (a turn, step
# 0), ``step`` (a step of a turn), ``in_turn`` (a turn, any step).
Level = Literal["session", "turn", "step", "in_turn"]
# The (turn, step) of each level; the schema states the same rules
# (`acp_bridge.log.schema_gen.LEVELS`, held to these by a test).
LEVEL_RULES: Final[dict[Level, Callable[[int, int], bool]]] = {
    "session": lambda turn, step: turn == 0 and step == 0,
    "turn": lambda turn, step: turn >= 1 and step == 0,
    "step": lambda turn, step: turn >= 1 and step >= 1,
    "in_turn": lambda turn, step: turn >= 1,
}


def _absent_or_set(schema: dict[str, Any]) -> None:
    """A field that may be left out but is never ``null`` when present."""
    branches = [s for s in schema.pop("anyOf") if s != {"type": "null"}]
    if len(branches) == 1:
        schema.update(branches[0])
    else:
        schema["anyOf"] = branches


def _optional(**kwargs: Any) -> Any:
    """An optional field without a ``null`` value (the writer leaves it out)."""
    return Field(default=None, json_schema_extra=_absent_or_set, **kwargs)


Count = Annotated[StrictInt, Field(ge=0)]
Positive = Annotated[StrictInt, Field(ge=1)]
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # an int too, never a str
AttemptId = Annotated[
    StrictStr,
    Field(min_length=1, description="The id of one model stream attempt, unique in the file."),
]
MessageId = Annotated[
    StrictStr, Field(min_length=1, description="The ACP messageId of the chunks of this attempt.")
]
DeltaKind = Literal["text", "reasoning", "tool_args"]
FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
# A fixed-length JSON array (strict mode would want a Python tuple).
_ARRAY: Final = Field(strict=False)


class _Part(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _no_null_for_absent(cls, data: Any) -> Any:
        """A field declared with `_optional` is left out, never written as null."""
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                if field.json_schema_extra is _absent_or_set and data.get(name, 0) is None:
                    raise ValueError(f"{name}: leave it out rather than null")
        return data


class _Closed(_Part):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class _Open(_Part):
    """A part that may carry fields of another protocol (ACP's annotations, _meta...)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)


# -- content blocks ---------------------------------------------------------


class TextBlock(_Open):
    """Text. Extra ACP fields (annotations, _meta) are kept."""

    type: Literal["text"]
    text: StrictStr


class ReasoningBlock(_Closed):
    type: Literal["reasoning"]
    text: StrictStr


class ToolCallBlock(_Closed):
    type: Literal["tool_call"]
    id: NonEmpty
    name: NonEmpty
    input: dict[str, Any]


class ResourceLinkBlock(_Open):
    """An ACP resource link; other ACP fields are kept."""

    type: Literal["resource_link"]
    uri: StrictStr
    name: StrictStr


class ResourceBlock(_Open):
    """An embedded resource, flattened from ACP's {resource: {uri, text | blob, mimeType}}."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["text"]}, {"required": ["blob"]}]}
    )
    type: Literal["resource"]
    uri: StrictStr
    text: StrictStr | None = _optional()
    blob: StrictStr | None = _optional(description="Base64 data.")
    mimeType: StrictStr | None = None  # the ACP name

    @model_validator(mode="after")
    def _text_or_blob(self) -> ResourceBlock:
        if (self.text is None) == (self.blob is None):
            raise ValueError("a resource has its text or its blob")
        return self


class ImageBlock(_Open):
    type: Literal["image"]
    data: StrictStr
    mimeType: StrictStr  # the ACP name


UserBlock = TextBlock | ResourceLinkBlock | ResourceBlock | ImageBlock
AssistantBlock = TextBlock | ReasoningBlock | ToolCallBlock


class PromptBlock(_Open):
    """An ACP ContentBlock exactly as the editor sent it."""

    type: StrictStr


# -- parts of records -------------------------------------------------------


class Usage(_Open):
    """Token counts reported by the provider."""

    __pydantic_extra__: dict[str, StrictInt | None]
    input_tokens: Count
    output_tokens: Count
    context_window: Count | None = None


class RequestError(_Closed):
    kind: NonEmpty
    message: StrictStr
    retryable: StrictBool
    status: StrictInt | None
    request_id: StrictStr | None


class CompactionError(_Open):
    kind: NonEmpty
    message: StrictStr
    retryable: StrictBool | None = _optional()
    status: StrictInt | None = None
    request_id: StrictStr | None = None


class InternalErrorDetail(_Open):
    kind: Literal["internal"]
    message: StrictStr
    exception: StrictStr


class Cost(_Closed):
    amount: Annotated[Number, Field(ge=0)]
    currency: StrictStr


class Parent(_Open):
    """A fork: the session it was forked from and the last turn it copied."""

    session_id: StrictStr | None
    turn: Count


class Owner(_Open):
    """A subagent's parent: the session and the ``task`` tool call that started it."""

    session_id: StrictStr
    tool_call: StrictStr
    depth: Positive | None = _optional(
        description="How deep the subagent is (1: a child of the editor's session)."
    )


class ToolUpdate(_Open):
    """The ACP tool_call / tool_call_update as sent, without sessionUpdate."""

    toolCallId: NonEmpty  # the ACP name
    status: Literal["pending", "in_progress", "completed", "failed"] | None = _optional()
    content: list[Any] | None = _optional()
    locations: list[Any] | None = _optional()


# -- records ----------------------------------------------------------------


class When(NamedTuple):
    """A rule of a record type: when ``field`` is ``value``, the ``required`` fields are there."""

    field: str
    value: Any
    required: tuple[str, ...]


class RecordBase(_Closed):
    """The envelope every record has."""

    level: ClassVar[Level]
    when: ClassVar[tuple[When, ...]] = ()
    v: Literal[1] = Field(description="Record format version.")
    seq: Count = Field(description="0 for the first record of the file, then +1 per record.")
    at: Annotated[float, Field(strict=True, allow_inf_nan=False)] = Field(
        description="Wall-clock time, seconds since the Unix epoch."
    )
    type: StrictStr
    turn: Count = Field(
        description="The prompt turn (1 = first session/prompt; 0 = session level)."
    )
    step: Count = Field(description="The model call within the turn (1 = first; 0 = turn level).")

    @model_validator(mode="after")
    def _at_its_level(self) -> RecordBase:
        if not LEVEL_RULES[self.level](self.turn, self.step):
            raise ValueError(f"turn {self.turn}, step {self.step} is not {self.level} level")
        for rule in self.when:
            if getattr(self, rule.field) == rule.value:
                missing = [name for name in rule.required if name not in self.model_fields_set]
                if missing:
                    raise ValueError(f"{rule.field} {rule.value!r} needs {', '.join(missing)}")
        return self


class SessionStart(RecordBase):
    """The first record of a session file."""

    level = "session"
    type: Literal["session/start"]
    session_id: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")]
    cwd: StrictStr = Field(description="Absolute working directory of the session.")
    provider: StrictStr = Field(description="Name of the model provider.")
    created_at: Annotated[float, Field(strict=True)] | StrictStr | None = _optional(
        description="When the session was created (older files; `at` is the same moment)."
    )
    additional_directories: list[StrictStr] | None = _optional(
        description="session/new additionalDirectories, when given: absolute paths."
    )
    client_info: dict[str, Any] | None = _optional(description="initialize clientInfo, as sent.")
    client_capabilities: dict[str, Any] | None = _optional(
        description="initialize clientCapabilities, as sent."
    )
    title: StrictStr | None = Field(
        default=None, description="The session's title; null until one is set."
    )
    parent: Parent | None = _optional()
    owner: Owner | None = _optional(description="A subagent's parent session and tool call.")


class SessionMode(RecordBase):
    """The session's mode was switched (session/set_mode or the mode config option), or
    a subagent was given its parent's mode when it was made (``via: parent``)."""

    level = "session"
    type: Literal["session/mode"]
    mode: Literal["ask", "accept_edits", "read_only"]
    via: Literal["set_mode", "config_option", "parent"]


class PermissionRule(RecordBase):
    """A remembered permission choice (allow always / reject always) for a tool of the session."""

    level = "session"
    type: Literal["permission/rule"]
    tool: NonEmpty
    decision: Literal["allow_always", "reject_always"]
    cwd: str | None = _optional(
        description="The session's cwd when the choice was given: it counts only there."
    )


class SessionSystemPrompt(RecordBase):
    """The system prompt the editor gave the session (ACP's ``systemPrompt``), in
    force from the next model request on until another replaces it."""

    level = "session"
    type: Literal["session/system_prompt"]
    mode: Literal["append", "override"]
    content: list[dict[str, Any]] = Field(
        min_length=1, description="Its content blocks as the editor sent them (text blocks)."
    )


class TurnStart(RecordBase):
    level = "turn"
    type: Literal["turn/start"]
    regenerates: Positive | None = _optional(
        description="A regenerate: the user turn this turn answers again (it has no user/message)."
    )
    prompt: list[Any] | None = _optional(
        description="A slash command turn (/regenerate and the others): its ACP blocks as received."
    )
    command: Literal["compact", "model", "mode", "status", "clear", "help"] | None = _optional(
        description=(
            "A slash command's turn: no user/message and no step. /compact has only its "
            "compaction; the others one command/answer. /clear is the boundary after which "
            "the model history starts empty."
        )
    )


class TurnEnd(RecordBase):
    level = "turn"
    type: Literal["turn/end"]
    reason: TurnEndReason
    forced: StrictBool = Field(
        description="True when the cancel deadline expired: the turn was abandoned, not unwound."
    )
    left_out: StrictBool | None = _optional(
        description="True: the turn is left out of the model history (its prompt did not fit)."
    )


class StepStart(RecordBase):
    level = "step"
    type: Literal["step/start"]


class StepEnd(RecordBase):
    level = "step"
    type: Literal["step/end"]
    reason: StepEndReason


class StreamStart(RecordBase):
    level = "step"
    type: Literal["stream/start"]
    attempt: AttemptId
    provider: StrictStr
    message_id: MessageId | None = _optional()


class StreamDelta(RecordBase):
    """Text delivered to the editor since the previous delta of the attempt, coalesced per block."""

    level = "step"
    type: Literal["stream/delta"]
    attempt: AttemptId
    parts: Annotated[
        list[Annotated[tuple[Count, DeltaKind, StrictStr], _ARRAY]], Field(min_length=1)
    ]


class StreamEnd(RecordBase):
    level = "step"
    type: Literal["stream/end"]
    attempt: AttemptId
    outcome: StreamOutcome


class UserMessage(RecordBase):
    level = "turn"
    type: Literal["user/message"]
    content: list[UserBlock]
    prompt: list[PromptBlock] | None = _optional(
        description="The session/prompt content blocks exactly as the editor sent them."
    )


class AssistantMessage(RecordBase):
    level = "step"
    type: Literal["assistant/message"]
    attempt: AttemptId
    message_id: MessageId | None = _optional()
    content: Annotated[list[AssistantBlock], Field(min_length=1)]
    interrupted: StrictBool = Field(
        description=(
            "True only for a user stop: the content is exactly the non-blank text and "
            "reasoning of the attempt's stream/delta records."
        )
    )
    finish: FinishReason | None = Field(
        description="The provider's finish reason; null when the stream did not finish."
    )
    usage: Usage | None
    stream: (
        list[Annotated[tuple[Annotated[Number, Field(ge=0)], Count, DeltaKind, StrictStr], _ARRAY]]
        | None
    ) = _optional(
        description=(
            "Written by older versions on an interrupted message: its stream/delta "
            "parts again, [t_ms, index, kind, text] each (ms since the stream's start)."
        )
    )
    recovered: Literal["crashed"] | None = _optional(
        description="Rebuilt from the stream's deltas when the log was reopened after a crash."
    )


class ToolResult(RecordBase):
    level = "step"
    type: Literal["tool/result"]
    tool_call_id: NonEmpty
    content: list[UserBlock]
    is_error: StrictBool


class AssistantAttempt(RecordBase):
    """A model stream that produced no surface message; never enters model history."""

    level = "step"
    type: Literal["assistant/attempt"]
    attempt: AttemptId
    message_id: MessageId | None = _optional()
    outcome: AttemptOutcome
    content: list[AssistantBlock]


class AgentRequestError(RecordBase):
    level = "step"
    type: Literal["agent/request-error"]
    attempt: AttemptId | None = Field(
        description="Null when the request failed before a stream started."
    )
    error: RequestError
    retrying: Literal[True] | None = _optional(
        description="The provider retries the request itself (the editor was shown a notice)."
    )
    retry_attempt: Positive | None = _optional()
    retry_delay: Annotated[Number, Field(ge=0)] | None = _optional(
        description="Seconds before the retry."
    )


class ToolCall(RecordBase):
    level = "step"
    type: Literal["tool/call"]
    tool_call_id: NonEmpty
    name: NonEmpty
    input: dict[str, Any]
    status: ToolCallStatus


class ToolShown(RecordBase):
    """A tool_call (tool/announce) or tool_call_update (tool/update) sent to the editor."""

    level = "step"
    type: Literal["tool/announce", "tool/update"]
    tool_call_id: NonEmpty
    update: ToolUpdate


class UsageUpdate(RecordBase):
    """A usage_update sent: step level after a model response, turn level after a compaction."""

    level = "in_turn"
    type: Literal["usage/update"]
    used: Count
    size: Count
    cost: Cost | None = _optional(
        description="The session's cumulative cost, when prices are configured."
    )


class AgentInternalError(RecordBase):
    """A bug in the agent's own loop; the turn ends with reason internal."""

    level = "in_turn"
    type: Literal["agent/internal-error"]
    error: InternalErrorDetail


class Compaction(RecordBase):
    """One stage of a compaction of the model history (in_progress, then its outcome)."""

    when = (
        When("status", "completed", ("summary", "kept_from", "pinned", "replaced", "tokens_after")),
        When("status", "failed", ("error",)),
    )
    level = "turn"
    type: Literal["compaction"]
    compaction_id: NonEmpty
    attempt: AttemptId
    status: CompactionStatus
    trigger: CompactionTrigger
    instructions: StrictStr | None = _optional(description="What the user asked of a /compact.")
    tokens_before: Count | None = _optional()
    summary: NonEmpty | None = _optional()
    kept_from: Count | None = _optional(
        description="Surface records from this seq on stay verbatim."
    )
    pinned: list[Count] | None = _optional(
        description="Seqs of older surface records kept verbatim."
    )
    replaced: Count | None = _optional(description="History messages the summary replaced.")
    tokens_after: Count | None = _optional()
    usage: Usage | None = None
    error: CompactionError | None = _optional()


class CommandAnswer(RecordBase):
    """What a slash command answered (shown to the editor as an agent message; never in
    the model history)."""

    level = "turn"
    type: Literal["command/answer"]
    text: StrictStr


class McpTool(_Closed):
    """A tool an MCP server offers: the name the model sees, the server's own name, and a
    hash of its input schema."""

    name: StrictStr
    tool: StrictStr
    schema_: StrictStr = Field(alias="schema")


class McpServer(RecordBase):
    """An MCP server of the session: starting, connected (its tools), tools (changed), failed."""

    level = "session"
    type: Literal["mcp/server"]
    name: NonEmpty
    status: Literal["starting", "connected", "tools", "failed"]
    transport: Literal["stdio", "http", "sse"] | None = _optional()
    origin: Literal["editor", "config"] | None = _optional()
    tools: list[McpTool] | None = _optional()
    error: StrictStr | None = _optional()


RECORDS: Final[tuple[type[RecordBase], ...]] = (
    SessionStart,
    TurnStart,
    TurnEnd,
    StepStart,
    StepEnd,
    StreamStart,
    StreamDelta,
    StreamEnd,
    UserMessage,
    AssistantMessage,
    ToolResult,
    AssistantAttempt,
    AgentRequestError,
    ToolCall,
    ToolShown,
    UsageUpdate,
    AgentInternalError,
    SessionMode,
    PermissionRule,
    Compaction,
    CommandAnswer,
    McpServer,
    SessionSystemPrompt,
)
"""Every record type's model (the schema lists them in this order)."""


def record_type_of(model: type[RecordBase]) -> tuple[str, ...]:
    """The ``type`` values a model is for (its ``type`` Literal)."""
    return get_args(model.model_fields["type"].annotation)


def records_by_type() -> dict[str, type[RecordBase]]:
    """Each record type's model."""
    return {name: model for model in RECORDS for name in record_type_of(model)}
