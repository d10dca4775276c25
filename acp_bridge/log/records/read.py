"""The shapes of the event-log records, as pydantic models (read side only).

`acp_bridge.log.records` documents the vocabulary and
`acp_bridge.log.records.models` defines it (closed); this module states, once,
the type of every field a reader relies on (a test holds it to that
definition), so that a damaged or foreign log is reported as
``file:line: field: reason`` instead of surprising the code that derives a
history from it.  The writer never uses these models: the hot path
stays on plain dicts and orjson, and this module (with pydantic) is imported
only by code that validates a log (``acp-bridge history``,
`acp_bridge.log.reader.read_valid_records`).

The models are open on purpose:

* every record may carry fields that are not listed here (a newer writer adds
  message ids, tool-call announcements, session metadata...), and they are
  kept as they are;
* closed vocabularies (stop reasons, outcomes) are plain strings, so a new
  value does not make an old reader refuse a log;
* a record ``type`` that has no model here is not an error; the reader skips
  it with a warning (`model_for` returns ``None``).

The checks are strict where a wrong type would mislead a reader: an integer
field never accepts a string, a float, a boolean, an array or an object.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

__all__ = ["RECORD_MODELS", "Record", "model_for"]

Count = Annotated[StrictInt, Field(ge=0)]
NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Seconds = Annotated[float, Field(strict=True, allow_inf_nan=False)]
# A fixed-length JSON array: strict mode would want a Python tuple, and JSON
# has only lists (the items stay strict).
_ARRAY: Final = Field(strict=False)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class Block(_Open):
    """A content block.  Only ``type`` is required; known fields are typed if present.

    The derivation drops blocks it cannot use, so a block of an unknown type
    or without its text is not an error of the log.
    """

    type: StrictStr
    text: StrictStr | None = None
    id: StrictStr | None = None
    name: StrictStr | None = None
    input: dict[str, Any] | None = None
    uri: StrictStr | None = None
    tool_call_id: StrictStr | None = None
    is_error: StrictBool | None = None


class Record(_Open):
    """The envelope every record has."""

    v: StrictInt  # the reader checks it against the versions it knows
    seq: Count
    at: Seconds
    type: StrictStr
    turn: Count
    step: Count


class SessionStart(Record):
    session_id: StrictStr
    cwd: StrictStr
    provider: StrictStr
    created_at: Seconds | StrictStr | None = None


class TurnStart(Record):
    pass


class TurnEnd(Record):
    reason: StrictStr
    forced: StrictBool = False
    left_out: StrictBool = False


class StepStart(Record):
    pass


class StepEnd(Record):
    reason: StrictStr


class StreamStart(Record):
    attempt: NonEmpty
    provider: StrictStr


class StreamDelta(Record):
    attempt: NonEmpty
    parts: list[Annotated[tuple[Count, StrictStr, StrictStr], _ARRAY]]


class StreamEnd(Record):
    attempt: NonEmpty
    outcome: StrictStr


class UserMessage(Record):
    content: list[Block]


class Usage(_Open):
    input_tokens: Count
    output_tokens: Count
    context_window: Count | None = None


class AssistantMessage(Record):
    attempt: NonEmpty
    content: list[Block]
    interrupted: StrictBool
    finish: StrictStr | None = None
    usage: Usage | None = None
    stream: list[Annotated[tuple[Seconds, Count, StrictStr, StrictStr], _ARRAY]] | None = None


class ToolResult(Record):
    tool_call_id: NonEmpty
    content: list[Block]
    is_error: StrictBool


class AssistantAttempt(Record):
    attempt: NonEmpty
    outcome: StrictStr
    content: list[Block]


class RequestError(_Open):
    kind: StrictStr
    message: StrictStr
    retryable: StrictBool
    status: StrictInt | None = None
    request_id: StrictStr | None = None


class AgentRequestError(Record):
    attempt: NonEmpty | None
    error: RequestError


class ToolCall(Record):
    tool_call_id: NonEmpty
    name: StrictStr
    input: dict[str, Any]
    status: StrictStr


class ToolShown(Record):
    """``tool/announce`` and ``tool/update``: a ``tool_call``(``_update``) sent to the editor."""

    tool_call_id: NonEmpty
    update: dict[str, Any]


class Cost(_Open):
    amount: Annotated[float, Field(strict=False, allow_inf_nan=False)]
    currency: StrictStr


class UsageUpdate(Record):
    used: Count
    size: Count
    cost: Cost | None = None


class Compaction(Record):
    """``compaction``: one stage of a compaction of the model history."""

    compaction_id: NonEmpty
    attempt: NonEmpty
    status: StrictStr
    trigger: StrictStr | None = None
    summary: StrictStr | None = None
    kept_from: Count | None = None
    pinned: list[Count] | None = None
    replaced: Count | None = None
    tokens_before: Count | None = None
    tokens_after: Count | None = None
    usage: Usage | None = None
    error: RequestError | None = None


class InternalErrorDetail(_Open):
    kind: StrictStr
    message: StrictStr
    exception: StrictStr | None = None


class AgentInternalError(Record):
    error: InternalErrorDetail


class SessionMode(Record):
    """``session/mode``: the session's tool mode switched (and by what)."""

    mode: NonEmpty
    via: StrictStr


class PermissionRule(Record):
    """``permission/rule``: an "always" answer the user gave for a tool."""

    tool: NonEmpty
    decision: NonEmpty
    cwd: StrictStr | None = None


class SessionSystemPrompt(Record):
    """``session/system_prompt``: the system prompt the editor gave the session."""

    mode: NonEmpty
    content: list[dict[str, Any]]


class CommandAnswer(Record):
    """``command/answer``: what a slash command answered."""

    text: StrictStr


class McpServer(Record):
    """``mcp/server``: an MCP server of the session started, connected, changed or failed."""

    name: NonEmpty
    status: NonEmpty
    transport: StrictStr | None = None
    origin: StrictStr | None = None
    tools: list[dict[str, StrictStr]] | None = None
    error: StrictStr | None = None


RECORD_MODELS: Final[dict[str, type[Record]]] = {
    "session/start": SessionStart,
    "turn/start": TurnStart,
    "turn/end": TurnEnd,
    "step/start": StepStart,
    "step/end": StepEnd,
    "stream/start": StreamStart,
    "stream/delta": StreamDelta,
    "stream/end": StreamEnd,
    "user/message": UserMessage,
    "assistant/message": AssistantMessage,
    "tool/result": ToolResult,
    "assistant/attempt": AssistantAttempt,
    "agent/request-error": AgentRequestError,
    "tool/call": ToolCall,
    # What the editor was shown and the agent's own failures (format 1 too;
    # older readers skip them with a warning).
    "tool/announce": ToolShown,
    "tool/update": ToolShown,
    "usage/update": UsageUpdate,
    "agent/internal-error": AgentInternalError,
    "session/mode": SessionMode,
    "permission/rule": PermissionRule,
    "compaction": Compaction,
    "command/answer": CommandAnswer,
    "mcp/server": McpServer,
    "session/system_prompt": SessionSystemPrompt,
}
"""The model of each known record type (every type of `records.RECORD_TYPES` has one)."""


def model_for(record_type: str) -> type[Record] | None:
    """The model of a record type, or ``None`` for a type this reader does not know."""
    return RECORD_MODELS.get(record_type)
