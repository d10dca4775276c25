"""What `acp-bridge check` checks: each requirement, its tier, and the spec text behind it.

Tiers, as in the ACP organisation's conformance suite:

* ``mandatory``: a MUST of ACP v1 (or of JSON-RPC 2.0, which ACP is built on)
  that every agent has to meet;
* ``capability``: a MUST that applies once the agent advertises the capability
  (``loadSession``, ``sessionCapabilities.list``, ...) or shows the behaviour
  (a permission request): then it binds like a mandatory one;
* ``advisory``: what the spec says an agent SHOULD do, or what its users need
  from it where the spec is silent (a load after a Stop shows what they saw).

The quotes are verbatim from ``docs/protocol/v1/*.mdx`` of the ACP specification
repository at commit b7f0005 (markup removed), from the schema's descriptions,
and from the JSON-RPC 2.0 specification.

It is long because it is one table of data, one entry per
requirement with its quote; it holds no logic to split.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Tier(StrEnum):
    MANDATORY = "mandatory"
    CAPABILITY = "capability"
    ADVISORY = "advisory"


@dataclass(frozen=True)
class Quote:
    source: str
    text: str


@dataclass(frozen=True)
class Requirement:
    id: str
    tier: Tier
    title: str
    requirement: str
    quotes: tuple[Quote, ...]
    applies_if: str | None = None
    """For a capability check: what must be advertised (or seen) for it to apply."""


JSONRPC = "JSON-RPC 2.0 specification"
REPLY = Quote(
    JSONRPC + ", 5 Response object",
    "When a rpc call is made, the Server MUST reply with a Response, except for in the case "
    "of Notifications.",
)
CANCELLED = Quote(
    "prompt-turn.mdx, Cancellation",
    "After all ongoing operations have been successfully aborted and pending updates have been "
    "sent, the Agent MUST respond to the original session/prompt request with the cancelled "
    "stop reason.",
)
CATCH = Quote(
    "prompt-turn.mdx, Cancellation",
    "Agents MUST catch these errors and return the semantically meaningful cancelled stop "
    "reason, so that Clients can reliably confirm the cancellation.",
)
BEFORE_RESPONSE = Quote(
    "prompt-turn.mdx, Cancellation",
    "The Agent MAY send session/update notifications with content or tool call updates after "
    "receiving the session/cancel notification, but it MUST ensure that it does so before "
    "responding to the session/prompt request.",
)
BASELINE = Quote(
    "initialization.mdx, Agent Capabilities",
    "As a baseline, all Agents MUST support session/new, session/prompt, session/cancel, and "
    "session/update.",
)
VERSION = Quote(
    "initialization.mdx, Version Negotiation",
    "If the Agent supports the requested version, it MUST respond with the same version. "
    "Otherwise, the Agent MUST respond with the latest version it supports.",
)
REPLAY = Quote(
    "session-setup.mdx, Loading Sessions",
    "The Agent MUST replay the entire conversation to the Client in the form of session/update "
    "notifications (like session/prompt).",
)
REPLAY_THEN_RESPOND = Quote(
    "session-setup.mdx, Loading Sessions",
    "When all the conversation entries have been streamed to the Client, the Agent MUST respond "
    "to the original session/load request.",
)

_ALL = (
    # -- mandatory -------------------------------------------------------------------
    Requirement(
        "initialize.version",
        Tier.MANDATORY,
        "initialize answers the version asked for",
        "initialize with protocolVersion 1 is answered with protocolVersion 1 (an integer) and "
        "a valid InitializeResponse",
        (VERSION,),
    ),
    Requirement(
        "initialize.negotiation",
        Tier.MANDATORY,
        "an unsupported version is answered with the latest supported one",
        "initialize with protocolVersion 999 is answered with an integer version the agent "
        "supports, not 999",
        (VERSION,),
    ),
    Requirement(
        "session.new",
        Tier.MANDATORY,
        "session/new answers a unique session id",
        "two session/new requests (an absolute cwd, no MCP servers) are answered with two "
        "different session ids",
        (
            Quote(
                "session-setup.mdx, Creating a Session",
                "The Agent MUST respond with a unique Session ID that identifies this conversation",
            ),
        ),
    ),
    Requirement(
        "stdout.valid",
        Tier.MANDATORY,
        "stdout carries only valid ACP messages",
        "every line the agent wrote to stdout, in every scenario, is a JSON-RPC message that "
        "validates against the ACP v1 schema (the checker's own frames are validated too)",
        (
            Quote(
                "transports.mdx, stdio",
                "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
            ),
        ),
    ),
    Requirement(
        "capability.gating",
        Tier.MANDATORY,
        "no request for a capability the client did not advertise",
        "the checker advertises no file system, terminal or elicitation support; the agent "
        "never sends fs/*, terminal/* or elicitation/create, in any scenario",
        (
            Quote(
                "file-system.mdx",
                "If readTextFile or writeTextFile is false or not present, the Agent MUST NOT "
                "attempt to call the corresponding filesystem method.",
            ),
            Quote(
                "terminals.mdx",
                "If terminal is false or not present, the Agent MUST NOT attempt to call any "
                "terminal methods.",
            ),
            Quote(
                "elicitation.mdx",
                "Agents MUST NOT request a mode the Client has not advertised.",
            ),
        ),
    ),
    Requirement(
        "jsonrpc.method-not-found",
        Tier.ADVISORY,
        "an unknown method is answered with -32601",
        "a request for an unknown method (an extension method and a plain one) is answered "
        "with an error of code -32601 and the request's id",
        (
            Quote(
                "extensibility.mdx, Custom Requests",
                "If the receiving end doesn't recognize the custom method name, it should "
                'respond with the standard "Method not found" error',
            ),
        ),
    ),
    Requirement(
        "jsonrpc.bad-input",
        Tier.MANDATORY,
        "bad input is answered and the agent keeps serving",
        "after a line that is not JSON, an unknown method and a request with invalid params, "
        "every bad request is answered (which error is jsonrpc.method-not-found's and "
        "jsonrpc.invalid-params' to judge), and the agent still answers a valid request",
        (REPLY,),
    ),
    Requirement(
        "notification.no-response",
        Tier.MANDATORY,
        "notifications get no response",
        "session/cancel for an idle and for an unknown session, and an unknown extension "
        "notification, are answered with nothing",
        (
            Quote("overview.mdx", "Notifications never receive responses (success or error)"),
            Quote(
                JSONRPC + ", 4.1 Notification",
                "The Server MUST NOT reply to a Notification, including those that are within "
                "a batch request.",
            ),
        ),
    ),
    Requirement(
        "stop.cancelled",
        Tier.MANDATORY,
        "Stop mid-stream is answered cancelled",
        "a prompt stopped (session/cancel) while it streams is answered "
        '{"stopReason": "cancelled"}: not an error, not another stop reason',
        (CANCELLED, CATCH),
    ),
    Requirement(
        "stop.ordering",
        Tier.MANDATORY,
        "every update of a stopped turn before its response, none after",
        "no content or tool-call update of the stopped session (message, thought and user "
        "chunks, tool_call, tool_call_update, plan) arrives after the prompt's response "
        "(watched for --watch seconds, then a barrier request)",
        (BEFORE_RESPONSE,),
    ),
    Requirement(
        "stop.next-turn",
        Tier.MANDATORY,
        "the session takes a prompt after a Stop",
        "after a Stop, the next prompt of the same session streams again and is answered "
        "cancelled when stopped, with nothing after its response",
        (BASELINE, CANCELLED),
    ),
    Requirement(
        "stop.idle",
        Tier.MANDATORY,
        "a cancel with nothing to stop is harmless",
        "after session/cancel for an idle session and for an unknown session, the agent keeps "
        "serving and the next prompt streams: it is not answered cancelled before it is stopped",
        (
            Quote(
                "schema.json, StopReason cancelled",
                "The turn was cancelled by the client via session/cancel.",
            ),
            BASELINE,
        ),
    ),
    Requirement(
        "stop.race",
        Tier.MANDATORY,
        "a cancel right behind the prompt stops it",
        "session/prompt and session/cancel sent in one write, the cancel right after the "
        "prompt: the prompt is answered cancelled (within --stop-timeout), nothing after",
        (
            Quote(
                "prompt-turn.mdx, Cancellation",
                "Clients MAY cancel an ongoing prompt turn at any time by sending a "
                "session/cancel notification",
            ),
            CANCELLED,
        ),
    ),
    # -- capability ------------------------------------------------------------------
    Requirement(
        "load.replay",
        Tier.CAPABILITY,
        "session/load replays the conversation, then answers",
        "a session stopped mid-stream, loaded in a new process: session/load replays the "
        "conversation (the user's prompt and the agent's text included) as session/update "
        "before its response, and nothing after it",
        (REPLAY, REPLAY_THEN_RESPOND),
        applies_if="loadSession",
    ),
    Requirement(
        "resume.no-replay",
        Tier.CAPABILITY,
        "session/resume does not replay",
        "a session stopped mid-stream, resumed in a new process: no conversation update of "
        "it (message, thought and user chunks, tool calls, plan) before the response; updates "
        "that describe the session (commands, title, modes) are not a replay",
        (
            Quote(
                "session-setup.mdx, Resuming Sessions",
                "Unlike session/load, the Agent MUST NOT replay the conversation history via "
                "session/update notifications before responding.",
            ),
        ),
        applies_if="sessionCapabilities.resume",
    ),
    Requirement(
        "list.sessions",
        Tier.CAPABILITY,
        "session/list lists sessions, and an empty array when none match",
        "session/list for the session's cwd includes the session; for a cwd with no "
        "sessions it answers an empty sessions array",
        (
            Quote(
                "session-list.mdx",
                "When no sessions match the criteria, the Agent MUST return an empty sessions "
                "array.",
            ),
        ),
        applies_if="sessionCapabilities.list",
    ),
    Requirement(
        "close.cancels",
        Tier.CAPABILITY,
        "session/close stops the running prompt",
        "session/close while a prompt streams: the prompt is answered cancelled, the close is "
        "answered, and no update of the session follows the prompt's response",
        (
            Quote(
                "session-setup.mdx, Closing Sessions",
                "The Agent MUST cancel any ongoing work for that session as if session/cancel "
                "had been called, then free the resources associated with the session.",
            ),
        ),
        applies_if="sessionCapabilities.close",
    ),
    Requirement(
        "permission.stop",
        Tier.CAPABILITY,
        "a Stop during a permission request",
        "Stop while a session/request_permission is pending: the checker answers it "
        "cancelled, as a client must; the prompt is answered cancelled, the tool does not "
        "run, and nothing follows the response",
        (
            Quote(
                "prompt-turn.mdx, Cancellation",
                "The Client MUST respond to all pending session/request_permission requests "
                "with the cancelled outcome.",
            ),
            CANCELLED,
        ),
        applies_if="a permission request (--permission-prompt, or the scripted provider)",
    ),
    # -- advisory --------------------------------------------------------------------
    Requirement(
        "initialize.info",
        Tier.ADVISORY,
        "agentInfo names the agent",
        "the initialize response has agentInfo with a name and a version",
        (
            Quote(
                "initialization.mdx, Implementation Information",
                "Both Clients and Agents SHOULD provide information about their implementation "
                "in the clientInfo and agentInfo fields respectively.",
            ),
        ),
    ),
    Requirement(
        "jsonrpc.parse-error",
        Tier.ADVISORY,
        "a line that is not JSON is answered with -32700",
        "a line that is not JSON is answered with an error of code -32700 and id null",
        (
            Quote(
                JSONRPC + ", 5.1 Error object",
                "-32700 Parse error: Invalid JSON was received by the server.",
            ),
            Quote(
                JSONRPC + ", 5 Response object",
                "If there was an error in detecting the id in the Request object (e.g. Parse "
                "error/Invalid Request), it MUST be Null.",
            ),
        ),
    ),
    Requirement(
        "jsonrpc.invalid-params",
        Tier.ADVISORY,
        "invalid params are answered with -32602",
        "session/prompt whose prompt is a string, not an array of content blocks, is answered "
        "with an error of code -32602",
        (
            Quote(
                JSONRPC + ", 5.1 Error object",
                "-32602 Invalid params: Invalid method parameter(s).",
            ),
        ),
    ),
    Requirement(
        "load.after-stop",
        Tier.ADVISORY,
        "a load after a Stop replays what the user saw",
        "the agent message text session/load replays for the stopped turn is exactly the text "
        "delivered before the Stop: nothing the user saw is lost, nothing they never saw appears",
        (REPLAY,),
        applies_if="loadSession",
    ),
    Requirement(
        "prompt.queued",
        Tier.MANDATORY,
        "a prompt sent while one runs is answered, and so is the first",
        "a second session/prompt while the first streams: both get exactly one response "
        "(an error, or a stop reason) once the checker stops what runs; nothing hangs",
        (
            REPLY,
            Quote(
                "prompt-turn.mdx, Check for Completion",
                "If there are no pending tool calls, the turn ends and the Agent MUST respond "
                "to the original session/prompt request with a StopReason",
            ),
        ),
    ),
    Requirement(
        "stdio.eof",
        Tier.ADVISORY,
        "the agent exits when its stdin closes",
        "stdin closed while idle, and while a prompt streams: the agent exits within "
        "--exit-timeout",
        (
            Quote(
                "transports.mdx, stdio (sequence diagram)",
                "Client->>Agent Process: Close stdin, terminate subprocess",
            ),
        ),
    ),
)

META = Quote(
    "schema.json, _meta (on every type)",
    "The _meta property is reserved by ACP to allow clients and agents to attach additional "
    "metadata to their interactions. Implementations MUST NOT make assumptions about values "
    "at these keys.",
)
LINKS = Quote(
    "schema.json, PromptRequest.prompt",
    "As a baseline, the Agent MUST support text and resource_link content blocks, while other "
    "variants are optionally enabled via PromptCapabilities.",
)

# What an outside ACP v1 conformance kit (acp-tck) covers beyond the checks above:
# authentication, modes and config options, delete, prompt content, the envelope.
_COVERAGE = (
    # -- mandatory -------------------------------------------------------------------
    Requirement(
        "auth.methods",
        Tier.MANDATORY,
        "authMethods are well formed and only those the client can use",
        "initialize answers authMethods as a list of methods with distinct string ids and "
        "names, and no terminal method (the checker does not enable terminal auth)",
        (
            Quote(
                "schema.json, AuthMethodTerminal",
                "Agents MUST advertise this method only when the client enabled its terminal "
                "authentication capability.",
            ),
        ),
    ),
    Requirement(
        "prompt.resource-link",
        Tier.MANDATORY,
        "a prompt with a resource_link is accepted",
        "session/prompt with a text block and a resource_link block is answered with a stop "
        "reason, not an error (stopped once it streams)",
        (
            LINKS,
            Quote(
                "schema.json, ContentBlock resource_link",
                "All agents MUST support resource links in prompts.",
            ),
        ),
    ),
    Requirement(
        "jsonrpc.string-id",
        Tier.MANDATORY,
        "a string request id is echoed as it was sent",
        'requests with the string ids "acp-check-id" and "7" are answered with exactly those '
        "ids (strings, not numbers)",
        (
            Quote(
                "schema.json, RequestId",
                "The Server MUST reply with the same value in the Response object if included.",
            ),
        ),
    ),
    Requirement(
        "meta.accepted",
        Tier.MANDATORY,
        "_meta is accepted wherever the schema has it",
        "session/new with _meta, and session/prompt with _meta on its params and on a text "
        "block, are answered as without it (a session id; a stop reason)",
        (META,),
    ),
    Requirement(
        "text.utf8",
        Tier.MANDATORY,
        "non-ASCII text stays UTF-8",
        "a session in a folder with a non-ASCII name and a prompt in non-ASCII text are "
        "answered; every line the agent writes is UTF-8; no text it sends holds U+FFFD or the "
        "checker's words decoded as Latin-1; session/list (when advertised) gives the cwd back "
        "as sent",
        (
            Quote(
                "transports.mdx",
                "ACP uses JSON-RPC to encode messages. JSON-RPC messages MUST be UTF-8 encoded.",
            ),
        ),
    ),
    # -- capability ------------------------------------------------------------------
    Requirement(
        "auth.authenticate",
        Tier.CAPABILITY,
        "authenticate is answered for an advertised method",
        "authenticate with the first advertised agent method is answered: {} or an error "
        "that says why, not -32601 (an answer that waits for the user past --timeout is not "
        "exercised)",
        (
            Quote(
                "authentication.mdx, Advertising Authentication",
                "Agents advertise authentication options in the authMethods field of the "
                "initialize response. Each method has an id that the Client passes back to the "
                "Agent in a later authenticate request.",
            ),
            REPLY,
        ),
        applies_if="authMethods with an agent method",
    ),
    Requirement(
        "auth.logout",
        Tier.CAPABILITY,
        "logout is answered when advertised",
        "logout is answered {} (run only where it forgets nothing of the user's: acp-bridge "
        "scripted, with its own config folder, or with --logout)",
        (
            Quote(
                "authentication.mdx, Advertising Authentication",
                "If agentCapabilities.auth.logout is omitted or null, the Agent does not support "
                "logout and Clients MUST NOT call it. Supplying {} means the Agent supports the "
                "method.",
            ),
        ),
        applies_if="agentCapabilities.auth.logout",
    ),
    Requirement(
        "session.modes",
        Tier.ADVISORY,
        "session/set_mode switches to an advertised mode",
        "session/set_mode to another of the modes session/new answered is answered {}; a "
        "current_mode_update that follows names that mode",
        (
            Quote(
                "session-modes.mdx, Setting the current mode",
                "The current mode can be changed at any point during a session, whether the "
                "Agent is idle or generating a response.",
            ),
        ),
        applies_if="modes in the session/new answer",
    ),
    Requirement(
        "session.config-options",
        Tier.ADVISORY,
        "session/set_config_option answers the complete list",
        "session/set_config_option of a select option session/new answered, to another of its "
        "values, is answered with configOptions holding every option session/new answered, the "
        "one set at its new value",
        (
            Quote(
                "schema.json, SetSessionConfigOptionResponse.configOptions",
                "The full set of configuration options and their current values.",
            ),
        ),
        applies_if="a select option in the session/new answer's configOptions",
    ),
    Requirement(
        "session.delete",
        Tier.ADVISORY,
        "session/delete deletes",
        "session/delete of a session is answered {}, and session/list (when advertised) no "
        "longer lists it",
        (
            Quote(
                "session-delete.mdx, Semantics",
                "Deleted sessions no longer appear in future session/list results.",
            ),
        ),
        applies_if="sessionCapabilities.delete",
    ),
    Requirement(
        "session.additional-directories",
        Tier.ADVISORY,
        "session/new takes additionalDirectories",
        "session/new with an absolute additional directory is answered with a session id; "
        "session/list (when advertised), if it reports additionalDirectories, reports that one",
        (
            Quote(
                "schema.json, SessionCapabilities.additionalDirectories",
                "Supplying {} means the agent supports additionalDirectories on supported "
                "session lifecycle requests.",
            ),
        ),
        applies_if="sessionCapabilities.additionalDirectories",
    ),
    Requirement(
        "prompt.capabilities",
        Tier.CAPABILITY,
        "an advertised content type is accepted",
        "session/prompt with an image, audio or embedded resource block, for each one "
        "promptCapabilities advertises, is answered with a stop reason, not an error",
        (
            LINKS,
            Quote(
                "schema.json, PromptCapabilities.embeddedContext",
                "When enabled, the Client is allowed to include resource content blocks in "
                "prompt requests for pieces of context that are referenced in the message.",
            ),
        ),
        applies_if="promptCapabilities.image, audio or embeddedContext",
    ),
    # -- advisory --------------------------------------------------------------------
    Requirement(
        "session.delete-unknown",
        Tier.ADVISORY,
        "deleting a deleted or unknown session succeeds silently",
        "session/delete of a session deleted already, and of one that never existed, is "
        "answered {}",
        (
            Quote(
                "session-delete.mdx, Semantics",
                "Deleting an already-deleted session, or a session that never existed, SHOULD "
                "succeed silently.",
            ),
        ),
        applies_if="sessionCapabilities.delete",
    ),
    Requirement(
        "prompt.unadvertised",
        Tier.ADVISORY,
        "a content type not advertised is refused",
        "session/prompt with an image, audio or embedded resource block that promptCapabilities "
        "does not advertise is answered with an error (-32602), not taken as if supported",
        (
            LINKS,
            Quote(
                "schema.json, PromptCapabilities",
                "Indicates which content types beyond the baseline (text and resource links) "
                "the agent can process.",
            ),
        ),
    ),
)

REQUIREMENTS: dict[str, Requirement] = {r.id: r for r in (*_ALL, *_COVERAGE)}

__all__ = ["REQUIREMENTS", "Quote", "Requirement", "Tier"]
