"""The scenarios `acp-bridge check` plays, each against fresh agent processes.

Each scenario drives the agent through the test kit (`acp_bridge.testing`),
then records the results of the checks it decides, with the frames that show
them (see `acp_bridge.check.requirements` for what each check requires).  They
are grouped by theme: first contact (`basics`), Stop (`stops`), the rest of a
prompt's life (`turns`), stored sessions (`stored`), what an agent advertises
beyond the baseline (`capabilities`) and what a request may carry (`content`);
`frames` has what they share.  `V2_SCENARIOS` play the Stop scenarios against
an ACP v2 agent (the kit drives a v2 turn the same way), and the v2 resume
(`resume_v2`).
"""

from __future__ import annotations

from ..run import Scenario
from .basics import bad_input, basics
from .capabilities import SESSION_CHECKS, authentication, session_features
from .content import content
from .resume_v2 import resume_replay
from .stops import cancel_race, idle_cancel, stop
from .stored import close, stored_sessions
from .turns import permission, queued, stdin_eof

SCENARIOS: list[Scenario] = [
    Scenario(
        "basics",
        ("initialize.version", "initialize.negotiation", "initialize.info", "session.new"),
        basics,
    ),
    Scenario(
        "bad-input",
        (
            "jsonrpc.parse-error",
            "jsonrpc.method-not-found",
            "jsonrpc.invalid-params",
            "jsonrpc.bad-input",
        ),
        bad_input,
    ),
    Scenario("stop", ("stop.cancelled", "stop.ordering", "stop.next-turn"), stop),
    Scenario("idle-cancel", ("notification.no-response", "stop.idle"), idle_cancel),
    Scenario("cancel-race", ("stop.race",), cancel_race),
    Scenario("queued-prompts", ("prompt.queued",), queued),
    Scenario("permission", ("permission.stop",), permission),
    Scenario(
        "stored-sessions",
        ("load.replay", "load.after-stop", "resume.no-replay", "list.sessions"),
        stored_sessions,
    ),
    Scenario("close", ("close.cancels",), close),
    Scenario("stdin-eof", ("stdio.eof",), stdin_eof),
    Scenario(
        "authentication", ("auth.methods", "auth.authenticate", "auth.logout"), authentication
    ),
    Scenario("session-features", SESSION_CHECKS, session_features),
    Scenario(
        "content",
        (
            "jsonrpc.string-id",
            "meta.accepted",
            "prompt.resource-link",
            "prompt.capabilities",
            "prompt.unadvertised",
            "text.utf8",
        ),
        content,
    ),
]

V2_SCENARIOS: list[Scenario] = [
    Scenario("stop", ("stop.cancelled", "stop.ordering", "stop.next-turn"), stop),
    Scenario("cancel-race", ("stop.race",), cancel_race),
    Scenario("resume-replay", ("resume.replay", "resume.after-stop"), resume_replay),
]

__all__ = ["SCENARIOS", "V2_SCENARIOS"]
