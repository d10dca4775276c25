"""What ``acp-bridge check --protocol 2`` checks: the Stop contract in ACP v2 terms.

In v2 ``session/prompt`` is answered as soon as the prompt is inserted (with
its ``messageId``); the turn ends with an ``idle`` ``state_update``, and a Stop
is confirmed by ``idle`` with ``stopReason: "cancelled"``.  The checks keep the
ids of their v1 counterparts (``stop.cancelled`` is the same promise to the
user), so ``--only`` and a report read the same; what they require and the
sentence behind them are v2's.

The quotes are verbatim from the descriptions of the v2 JSON Schema
(``@agentclientprotocol/sdk@2.4.0``, ``schema/v2/schema.json``, bundled as
``acp_bridge/schemas/acp-v2.schema.json``), markup removed; the source names
the definition.  The schema says nothing of stdout: ``stdout.valid`` cites the
v1 transport, which v2 keeps.  Tiers as in `acp_bridge.check.requirements`.
"""

from __future__ import annotations

from .requirements import REQUIREMENTS, Quote, Requirement, Tier

SCHEMA = "v2 schema.json, "

CANCEL_CONFIRMED = Quote(
    SCHEMA + "ClientNotification session/cancel",
    "After all ongoing operations have been successfully aborted and pending updates have been "
    "sent, the Agent MUST send an idle state_update session update with the cancelled stop "
    "reason if cancellation ended active foreground work.",
)
CANCELLED_NOT_ERROR = Quote(
    SCHEMA + "IdleStateUpdate, stopReason cancelled",
    "Agents MUST report this stop reason on an idle state_update when cancellation ends active "
    "foreground work, even if aborting causes exceptions. Agents MUST catch these errors and "
    "report cancelled, not error.",
)
BEFORE_IDLE = Quote(
    SCHEMA + "ClientNotification session/cancel",
    "The Agent MAY send content or tool call updates after receiving session/cancel, but MUST "
    "send them before the idle state_update that reports cancellation.",
)
LIFECYCLE = Quote(
    SCHEMA + "StateUpdate",
    "Either way, the agent MUST report running when foreground work starts, or requires_action "
    "if it starts blocked on user action, and idle when it ends.",
)

_V2 = (
    Requirement(
        "stdout.valid",
        Tier.MANDATORY,
        "stdout carries only valid ACP v2 messages",
        "every line the agent wrote to stdout, in every scenario, is a JSON-RPC message that "
        "validates against the ACP v2 schema (the checker's own frames are validated too)",
        (
            Quote(
                "transports.mdx, stdio (v1; v2 keeps the transport)",
                "The agent MUST NOT write anything to its stdout that is not a valid ACP message.",
            ),
        ),
    ),
    Requirement(
        "stop.cancelled",
        Tier.MANDATORY,
        "Stop mid-stream is confirmed by idle(cancelled)",
        "a turn stopped (session/cancel) while it streams ends with an idle state_update whose "
        'stopReason is "cancelled": not another stop reason, and within --stop-timeout',
        (CANCEL_CONFIRMED, CANCELLED_NOT_ERROR),
    ),
    Requirement(
        "stop.ordering",
        Tier.MANDATORY,
        "every update of a stopped turn before its idle(cancelled), none after",
        "no content or tool-call update of the stopped session (message and thought chunks and "
        "upserts, tool calls and their content, terminal output, plans) arrives after the "
        "idle(cancelled) (watched for --watch seconds, then a barrier request)",
        (BEFORE_IDLE,),
    ),
    Requirement(
        "stop.next-turn",
        Tier.MANDATORY,
        "the session takes a prompt after a Stop",
        "after a Stop, the next prompt of the same session streams again and ends "
        "idle(cancelled) when stopped, with nothing after it",
        (LIFECYCLE, CANCEL_CONFIRMED),
    ),
    Requirement(
        "stop.race",
        Tier.MANDATORY,
        "a cancel right behind the prompt stops it",
        "session/prompt and session/cancel sent in one write, the cancel right after the "
        "prompt: the turn ends idle(cancelled) (within --stop-timeout), nothing after",
        (
            Quote(
                SCHEMA + "CancelSessionNotification",
                "Notification to cancel a session's foreground work and its prompts not yet "
                "inserted.",
            ),
            CANCEL_CONFIRMED,
        ),
    ),
    Requirement(
        "resume.replay",
        Tier.CAPABILITY,
        "session/resume with replayFrom replays, then reports the state, then answers",
        'a session stopped mid-stream, resumed in a new process with replayFrom {"type": '
        '"start"}: before the response, the user\'s prompt is replayed under the messageId its '
        "session/prompt was answered with, then a state_update reports the state; nothing of "
        "the conversation follows the response (an agent that refuses the cursor with -32602 "
        "is skipped)",
        (
            Quote(
                SCHEMA + "ResumeSessionRequest.replayFrom",
                "Agents MUST reject unsupported cursor types or malformed cursor values with "
                "-32602 (Invalid params), rather than substituting another cursor or resuming "
                "without replay.",
            ),
            Quote(
                SCHEMA + "PromptResponse.messageId",
                "Agents must echo the message during the live session, but are not required to "
                "retain it. If retained and replayed, the message keeps this identifier.",
            ),
            Quote(
                SCHEMA + "ResumeSessionResponse",
                "The agent MUST send a current state_update after any requested history replay "
                "and before this response, even without replay.",
            ),
        ),
        applies_if="agentCapabilities.session (session/resume is a baseline session method)",
    ),
    Requirement(
        "resume.after-stop",
        Tier.ADVISORY,
        "a resume after a Stop replays what the user saw",
        "the agent text that session/resume with replayFrom replays for the stopped turn, under "
        "the messageId of its chunks, is exactly the text delivered before the Stop",
        (
            Quote(
                SCHEMA + "ResumeSessionRequest.replayFrom",
                'Supplying { "type": "start" } means the Agent should replay all retained '
                "conversation history before responding.",
            ),
        ),
        applies_if="agentCapabilities.session",
    ),
)

V2_REQUIREMENTS: dict[str, Requirement] = {r.id: r for r in _V2}


def requirements_for(protocol: int) -> dict[str, Requirement]:
    """The checks of ``protocol``: v1's `REQUIREMENTS`, or v2's."""
    return V2_REQUIREMENTS if protocol == 2 else REQUIREMENTS


__all__ = ["V2_REQUIREMENTS", "requirements_for"]
