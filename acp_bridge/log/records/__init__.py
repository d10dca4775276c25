"""The durable event log's record vocabulary (format version 1), in one home.

This package is everything a log record is.  `acp_bridge.log.records.models`
defines every record type as a closed pydantic model: it is the source of
truth, and ``schemas/event-log.schema.json`` is generated from it.  This
module documents the records and holds what the write path needs of them
without pydantic: the format version, the closed vocabularies as ``Literal``
types (the models use them), and the sets of record types (a test holds
`RECORD_TYPES` to the models).  `acp_bridge.log.records.read` derives from
the same models the readers' open view (a newer log's fields, words and
types are tolerated).

A session is one JSONL file, ``<state-dir>/sessions/<session-id>.jsonl``.  Each
line is one JSON object (a *record*).  Records are append-only; nothing is ever
rewritten.  Every record has these fields:

``v``     int, the record format version (`FORMAT_VERSION`).
``seq``   int, 0 for the first record of the file, then +1 for each record
          (contiguous, no gaps).
``at``    float, wall-clock time of the record, seconds since the Unix epoch.
``type``  str, one of the types below.
``turn``  int, the prompt turn the record belongs to (1 = first
          ``session/prompt``; 0 = session-level records).
``step``  int, the step within the turn (1 = first model call of the turn;
          0 = turn-level records).

Session level (turn 0, step 0)
  ``session/start``  ``{session_id, cwd, provider, title, additional_directories?,
                     client_info?, client_capabilities?}``: the session's
                     metadata; ``additional_directories`` from ``session/new``
                     when given, ``client_info`` and ``client_capabilities``
                     from ``initialize`` as sent, ``title`` null until set
                     (``created_at`` is allowed for readers of older files;
                     ``at`` says when); a fork has ``parent: {session_id,
                     turn}``, the session and the last turn it copied

  ``session/mode``   ``{mode, via}``: the mode was switched (``ask``,
                     ``accept_edits``, ``read_only``; via ``set_mode`` or
                     ``config_option``); may come at any point after
                     ``session/start``
  ``permission/rule`` ``{tool, decision, cwd}``: a remembered permission choice
                     (``allow_always`` / ``reject_always``) for a tool name;
                     may come at any point after ``session/start``
  ``mcp/server``     ``{name, status, transport?, origin?, tools?, error?}``:
                     an MCP server of the session: ``starting`` (with its
                     transport and origin), ``connected`` or ``tools`` (the
                     tools it offers: ``{name, tool, schema}``, the name the
                     model sees, the server's name, a hash of the schema),
                     ``failed`` (with the error); may come at any point
                     after ``session/start``

  ``session/system_prompt`` ``{mode, content}``: the system prompt the editor
                     gave the session (``append`` or ``override``; its text
                     blocks as sent), in force from the next model request on;
                     the last one counts; may come at any point after
                     ``session/start``

Turn lifecycle
  ``turn/start``     ``{regenerates?, prompt?, command?}``  a regenerate names
                     the user turn it answers again and has no
                     ``user/message``; the ``/regenerate`` command keeps its
                     blocks in ``prompt``; a ``/compact`` turn has
                     ``command: "compact"``, its blocks in ``prompt``, no
                     user message and no step (only its compaction); the
                     other slash commands (``model``, ``mode``, ``status``,
                     ``clear``, ``help``) have ``command`` and ``prompt``,
                     no user message, no step and one ``command/answer``;
                     a ``clear`` turn is the boundary after which the model
                     history starts empty
  ``command/answer`` ``{text}``  what a slash command answered (turn level;
                     shown as an agent message, replayed, never in the
                     model history)
  ``user/message``   ``{content: [HistoryBlock], prompt}``       SURFACE
                     ``prompt``: the ACP content blocks exactly as received
                     (what a replay shows); ``content``: their history blocks
  ``turn/end``       ``{reason, forced, left_out?}``  reason is an ACP stop reason
                     (``end_turn``, ``max_tokens``, ``max_turn_requests``,
                     ``refusal``, ``cancelled``) or ``disconnected``,
                     ``error`` (the provider failed), ``internal`` (a bug
                     in the agent) or ``crashed`` (closed when the log was
                     reopened after the process died, see
                     `acp_bridge.log.reopen`); ``forced`` is true when the
                     cancel deadline expired and the turn was abandoned
                     rather than unwound, and for a crashed turn.
                     ``left_out: true``: the turn is left out of the model
                     history (its prompt did not fit the context window even
                     after compaction; reason ``error``).

Step lifecycle (one model call and the tools it asked for)
  ``step/start``     ``{}``
  ``step/end``       ``{reason}``  (``tool_use``, ``end_turn``, ``max_tokens``,
                     ``refusal``, ``cancelled``, ``disconnected``,
                     ``provider_error``, ``timed_out``, ``internal``,
                     ``crashed``)

Stream frames (the live model stream of one attempt)
  ``stream/start``   ``{attempt, provider, message_id}``  attempt: str id, unique
                     in the file; message_id: the ACP ``messageId`` of the
                     stream's chunks
  ``stream/delta``   ``{attempt, parts: [[index, kind, text], ...]}``  the text
                     delivered to the editor since the previous delta record,
                     coalesced; kind is ``"text"``, ``"reasoning"`` or
                     ``"tool_args"``.  Concatenating the parts of all delta
                     records of an attempt per (index, kind) rebuilds the
                     delivered prefix after a crash.
  ``stream/end``     ``{attempt, outcome}``  outcome ``committed`` (it produced a
                     surface message) or ``abandoned`` (it did not).

Surface records (the only ones that enter model history)
  ``assistant/message`` ``{attempt, message_id, content: [HistoryBlock], interrupted,
                         finish, usage}``  ``interrupted`` true only for a
                         user stop; then the content is exactly the non-blank
                         delivered text and reasoning of the attempt's
                         ``stream/delta`` records, which are its timed stream
                         (what was written to the editor, when).  Logs of
                         older versions repeat those parts in ``stream``
                         ``[[t_ms, index, kind, text], ...]``.
                         ``finish`` is the provider's finish reason, null
                         when the stream did not finish (interrupted);
                         ``usage`` is ``{input_tokens, output_tokens,
                         context_window?}`` or null if none was reported.
                         ``recovered: "crashed"``: an interrupted message
                         rebuilt from the deltas after the process died.
  ``tool/result``    ``{tool_call_id, content: [HistoryBlock], is_error}``

Attempts and errors (never enter model history)
  ``assistant/attempt``  ``{attempt, message_id, outcome, content: [HistoryBlock]}``
                         outcome: ``empty`` (a user stop with nothing but
                         whitespace delivered), ``provider_error``,
                         ``timed_out``, ``disconnected``, ``internal``, ``crashed``.
  ``agent/request-error`` ``{attempt, error: {kind, message, retryable,
                          status, request_id}, retrying?, retry_attempt?,
                          retry_delay?}``  attempt is null when the
                          request failed before its stream started;
                          ``retrying: true`` when the provider retries the
                          request itself (retry number, seconds before it);
                          the editor was shown a notice thought chunk that
                          is not reasoning.
  ``agent/internal-error`` ``{error: {kind: "internal", exception, message}}``
                          a bug in the agent's own loop (step 0 when no step
                          was open); the turn ends with reason ``internal``.

What the editor was shown (for ``session/load``; see `acp_bridge.log.replay`)
  ``tool/announce``  ``{tool_call_id, update}``  a ``tool_call`` sent to the
                     editor; ``update`` is the ACP object without
                     ``sessionUpdate``.
  ``tool/update``    ``{tool_call_id, update}``  a ``tool_call_update`` sent
                     (status, content, locations, rawInput/rawOutput).  A
                     turn ends (unless forced) only when every announced
                     call has had a final status (``completed``/``failed``).
  ``usage/update``   ``{used, size, cost?}``  a ``usage_update`` sent: tokens
                     in context and the context window, ``cost`` the session's
                     cumulative ``{amount, currency}`` when prices are
                     configured; step level after a model response, turn level
                     (step 0) after a compaction.

Context (turn level, step 0: between steps, never while one is open)
  ``compaction``     ``{compaction_id, attempt, status, trigger, ...}``  the
                     model history is compacted: a summary request (its own
                     ``attempt`` id, never streamed to the editor) replaces
                     older messages with their summary.  Two records per
                     compaction: ``in_progress`` (``tokens_before``, the
                     estimated size of the history, and ``instructions`` of a
                     ``/compact``), then its outcome: ``completed`` with
                     ``summary``, ``kept_from`` (surface records from this seq
                     on stay verbatim), ``pinned`` (seqs of older surface
                     records kept verbatim: the interrupted message of the
                     latest Stop, the prompt being answered), ``replaced``
                     (how many history messages the summary replaced),
                     ``tokens_after`` and ``usage`` of the summary request; or
                     ``failed`` with ``error`` (as in ``agent/request-error``);
                     or ``cancelled`` (a Stop).  ``trigger``: ``auto`` (the
                     next request would pass the threshold), ``overflow`` (the
                     provider rejected a request as too long) or ``command``.
                     The last ``completed`` one changes the model history
                     (`acp_bridge.log.derive.compacted_records`); the records
                     it summarized stay in the log.

Tools
  ``tool/call``      ``{tool_call_id, name, input, status}`` status
                     ``dispatched``, ``aborted`` (stopped before it ran),
                     ``unavailable`` (no such tool here: never ran) or
                     ``refused`` (invalid arguments, the mode, or the user
                     declined: never ran); always paired
                     with exactly one ``tool/result``.

HistoryBlock (also the content of model-history messages)
  ``{"type": "text", "text": str}``
  ``{"type": "reasoning", "text": str}``
  ``{"type": "tool_call", "id": str, "name": str, "input": object}``
  ``{"type": "tool_result", "tool_call_id": str, "content": [text blocks],
    "is_error": bool}``  (only inside derived user messages)
  ``{"type": "resource_link", "uri": str, "name": str, ...}``  (ACP fields)
  ``{"type": "resource", "uri": str, "text": str, "mimeType"?: str}``
  ``{"type": "image", "data": str, "mimeType": str}``

Reading and checking
  `acp_bridge.log.records.read` derives from the closed models the open
  pydantic models a reader checks a record with (the same fields and strict
  types; extra fields are kept, a closed vocabulary reads as a string, a
  content block needs only its ``type``, and a reader skips a record type it
  does not know with a warning); the writer never uses them;
  `acp_bridge.log.reader` reads a file back (a torn final line is ignored)
  and, with `read_valid_records`, checks each record against its model;
  `acp_bridge.log.derive` projects records onto the model history;
  `acp_bridge.log.open_turn` folds a turn's records into what is still open
  and the records that close it (a stop, a crash);
  `acp_bridge.log.check` states the rules a log and a history must follow;
  ``schemas/event-log.schema.json`` is the JSON Schema of one record.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

FORMAT_VERSION: Final = 1

# The closed vocabularies of the fields above, once, as types; the frozensets
# below are their values for code that checks a record read back.
TurnEndReason = Literal[
    "end_turn",
    "max_tokens",
    "max_turn_requests",
    "refusal",
    "cancelled",
    "disconnected",
    "error",
    "internal",
    "crashed",
]
StepEndReason = Literal[
    "tool_use",
    "end_turn",
    "max_tokens",
    "refusal",
    "cancelled",
    "disconnected",
    "provider_error",
    "timed_out",
    "internal",
    "crashed",
]
# The ACP stop reasons a turn is answered with (a subset of `TurnEndReason`).
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
# ``assistant/attempt.outcome``: why a stream left no surface message.
AttemptOutcome = Literal[
    "empty", "provider_error", "timed_out", "disconnected", "internal", "crashed"
]
# ``stream/end.outcome``.
StreamOutcome = Literal["committed", "abandoned"]
# ``tool/call.status``.
ToolCallStatus = Literal["dispatched", "aborted", "unavailable", "refused"]
CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]
CompactionTrigger = Literal["auto", "overflow", "command"]

STREAM_OUTCOMES: Final[frozenset[str]] = frozenset(get_args(StreamOutcome))

# ``assistant/message.recovered`` of a message that crash recovery rebuilt,
# and the reason of the turn it closed.
RECOVERED_CRASHED: Final = "crashed"

SURFACE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
# The records a session keeps of its log in memory: those `derive_messages`
# reads (``turn/start`` says which turn a regenerate replaces).  The rest
# (stream frames, attempts, settings) lives in the file alone; the projection
# of this subset equals that of the whole log, because derive_messages
# ignores every other type.
MODEL_TYPES: Final = SURFACE_TYPES | {"turn/start", "turn/end", "compaction"}
# Statuses of a ``compaction`` record (as ACP's ``compaction_update`` has them).
COMPACTION_STATUSES: Final[frozenset[str]] = frozenset(get_args(CompactionStatus))
# Tool call statuses after which the editor expects no further update.
FINAL_TOOL_STATUSES: Final = frozenset({"completed", "failed"})

# Session-level records that may come at any point after session/start.
SESSION_SETTING_TYPES: Final = frozenset(
    {"session/mode", "permission/rule", "mcp/server", "session/system_prompt"}
)

RECORD_TYPES: Final = frozenset(
    {
        "session/start",
        "turn/start",
        "turn/end",
        "step/start",
        "step/end",
        "stream/start",
        "stream/delta",
        "stream/end",
        "user/message",
        "assistant/message",
        "tool/result",
        "assistant/attempt",
        "agent/request-error",
        "tool/call",
        "tool/announce",
        "tool/update",
        "usage/update",
        "agent/internal-error",
        "session/mode",
        "permission/rule",
        "compaction",
        "command/answer",
        "mcp/server",
        "session/system_prompt",
    }
)
