"""The checks of ``acp-bridge check`` beyond the Stop: authentication, modes and
config options, session/delete, additional directories, prompt content, string
ids, ``_meta`` and UTF-8.

acp-bridge passes each of them; each fault of ``tests/faulty_sdk_agent.py`` made
for one fails it, for the reason it was made; a capability that is not
advertised is skipped, with the capability named.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from support.harness import ROOT

from acp_bridge.check.requirements import REQUIREMENTS, Tier
from acp_bridge.check.results import Outcome
from acp_bridge.check.runner import CheckOptions, Report, run_check
from acp_bridge.client import bridge_command

pytestmark = pytest.mark.anyio

FAULTY = [sys.executable, str(ROOT / "tests" / "faulty_sdk_agent.py")]
REFERENCE = [sys.executable, str(ROOT / "bench" / "ref_sdk_agent.py")]
FAST: dict[str, Any] = {
    "watch": 0.3,
    "timeout": 30.0,
    "stop_timeout": 30.0,
    "stream_timeout": 30.0,
    "exit_timeout": 30.0,
}
NEW_CHECKS = (
    "auth.methods",
    "auth.authenticate",
    "auth.logout",
    "session.modes",
    "session.config-options",
    "session.delete",
    "session.delete-unknown",
    "session.additional-directories",
    "prompt.resource-link",
    "prompt.capabilities",
    "prompt.unadvertised",
    "jsonrpc.string-id",
    "meta.accepted",
    "text.utf8",
)


async def check(command: list[str], *only: str, **options: Any) -> Report:
    return await run_check(
        CheckOptions(command=command, only=frozenset(only), **{**FAST, **options})
    )


def test_each_check_has_the_tier_of_its_sentence() -> None:
    """MUST: mandatory or capability (when it applies only to what is advertised);
    SHOULD, or no keyword of the spec: advisory."""
    for check_id in NEW_CHECKS:
        requirement = REQUIREMENTS[check_id]
        text = " ".join(q.text for q in requirement.quotes)
        if requirement.tier is Tier.ADVISORY:
            assert "MUST" not in text.replace("MUST support text and resource_link", ""), check_id
        elif requirement.tier is Tier.MANDATORY:
            assert "MUST" in text, check_id
            assert requirement.applies_if is None, check_id
        else:
            assert requirement.applies_if, check_id


async def test_acp_bridge_passes_every_new_check() -> None:
    report = await check(bridge_command(), *NEW_CHECKS, scripted=True)
    got = {r.requirement.id: (r.outcome, r.detail) for r in report.results}
    failed = {k: v for k, v in got.items() if k in NEW_CHECKS and v[0] is not Outcome.PASS}
    assert failed == {}
    assert set(NEW_CHECKS) <= set(got)
    assert "refused: an audio block" in got["prompt.unadvertised"][1]
    assert "accepted: an image block, an embedded resource block" in (got["prompt.capabilities"][1])
    assert report.exit_code == 0
    assert report.checker_frame_problems == []


async def test_what_the_reference_agent_does_not_advertise_is_skipped_not_passed() -> None:
    report = await check(REFERENCE, *NEW_CHECKS)
    got = {r.requirement.id: r for r in report.results}
    for check_id, why in {
        "session.delete": "sessionCapabilities.delete",
        "session.delete-unknown": "sessionCapabilities.delete",
        "session.additional-directories": "sessionCapabilities.additionalDirectories",
        "auth.logout": "agentCapabilities.auth.logout",
        "session.modes": "no modes",
        "prompt.capabilities": "advertises none",
    }.items():
        assert got[check_id].outcome is Outcome.SKIP, check_id
        assert why in got[check_id].detail, check_id
    # It takes every content block, advertised or not: an advisory failure.
    unadvertised = got["prompt.unadvertised"]
    assert unadvertised.outcome is Outcome.FAIL
    assert 'an audio block was answered {"stopReason": "cancelled"}' in unadvertised.detail
    assert not unadvertised.blocking
    assert report.exit_code == 0


FAULTS = [
    (["--terminal-auth"], "auth.methods", "terminal method 'login' although", {}),
    (["--auth-method"], "auth.authenticate", 'an error {"code": -32601', {}),
    (["--logout"], "auth.logout", "logout was answered an error", {"logout": True}),
    (["--modes"], "session.modes", "session/set_mode 'code' (an advertised mode)", {}),
    (["--config-options"], "session.config-options", "configOptions without ['model']", {}),
    (["--delete"], "session.delete-unknown", "of a session deleted already was answered", {}),
    (["--additional-directories"], "session.additional-directories", "-32602", {}),
    (["--refuse-links"], "prompt.resource-link", "a resource_link block was answered", {}),
    (["--image"], "prompt.capabilities", "advertised: an image block was answered", {}),
    (["--refuse-meta"], "meta.accepted", "session/new with _meta was answered an error", {}),
    (["--number-ids"], "jsonrpc.string-id", "id '7' was answered with id 7", {}),
    (["--mojibake"], "text.utf8", "'café' as Latin-1", {}),
]


@pytest.mark.parametrize(("flags", "check_id", "why", "options"), FAULTS)
async def test_each_fault_fails_its_check_for_its_reason(
    flags: list[str], check_id: str, why: str, options: dict[str, Any]
) -> None:
    report = await check([*FAULTY, *flags], check_id, **options)
    result = report.result(check_id)
    assert result.outcome is Outcome.FAIL, result.detail
    assert why in result.detail
    assert [i for e in result.evidence for i in e.marks], "the frames at fault are shown"
    assert (report.exit_code == 1) is (result.requirement.tier is not Tier.ADVISORY)


async def test_logout_is_not_sent_to_an_agent_without_the_option() -> None:
    report = await check([*FAULTY, "--logout"], "auth.logout")
    result = report.result("auth.logout")
    assert result.outcome is Outcome.SKIP
    assert "--logout" in result.detail
    sent = [m.get("method") for p in report.processes for d, m in p.transcript if d == "send"]
    assert "logout" not in sent
