"""``acp-bridge check`` against acp-bridge, the reference SDK agent, and faulty copies of it.

acp-bridge must pass every check; the reference agent of the benchmark (official
Python SDK, streams until cancelled) gets its real results; each fault of
``tests/faulty_sdk_agent.py`` must fail exactly the check made for it, name it,
show the frames at fault and make the exit status non-zero.  Timing figures are
reported, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import ROOT

from acp_bridge.check.report import render_json, render_text
from acp_bridge.check.requirements import REQUIREMENTS, Tier
from acp_bridge.check.results import Outcome
from acp_bridge.check.runner import CheckOptions, Report, run_check

pytestmark = pytest.mark.anyio

REFERENCE = [sys.executable, str(ROOT / "bench" / "ref_sdk_agent.py")]
FAULTY = [sys.executable, str(ROOT / "tests" / "faulty_sdk_agent.py")]
# A short watch window (these agents answer in milliseconds) and generous hang guards
# (a loaded machine is slow; no speed is asserted).
FAST: dict[str, Any] = {
    "watch": 0.3,
    "timeout": 30.0,
    "stop_timeout": 30.0,
    "stream_timeout": 30.0,
    "exit_timeout": 30.0,
}


def outcomes(report: Report) -> dict[str, str]:
    return {r.requirement.id: r.outcome.value for r in report.results}


async def check(command: list[str], *only: str, **options: Any) -> Report:
    return await run_check(
        CheckOptions(command=command, only=frozenset(only), **{**FAST, **options})
    )


@pytest.mark.slow
def test_acp_bridge_passes_every_check(tmp_path: Path) -> None:
    """The real command line, on acp-bridge itself (no agent command: its scripted provider)."""
    out = tmp_path / "report.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "acp_bridge", "check", "--watch", "0.3", "--json", str(out)),
            *("--timeout", "30", "--stop-timeout", "30", "--exit-timeout", "30"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert report["exit_code"] == 0
    results = {r["id"]: r for r in report["results"]}
    assert set(results) == set(REQUIREMENTS), "every check ran"
    failed = {k: r["detail"] for k, r in results.items() if r["outcome"] != "pass"}
    assert failed == {}
    assert report["checker_frame_problems"] == []
    assert report["checker_frames"] > 0
    assert done.stdout.rstrip().endswith("CONFORMANT")
    # Its resume sends the title and commands before the answer: what resume.no-replay
    # counts is the conversation, and it says so (it used to say "no session/update").
    assert results["resume.no-replay"]["detail"] == (
        "no conversation update (message, thought, tool call, plan) before the response; "
        "2 update(s) describing the session, not counted"
    )
    # The report names each check with its spec sentence.
    assert "stop.cancelled" in done.stdout
    assert "MUST respond to the original session/prompt request with the cancelled" in done.stdout


@pytest.mark.slow
async def test_the_reference_sdk_agent_gets_its_real_results() -> None:
    report = await check(REFERENCE)
    got = outcomes(report)
    mandatory = {
        r.requirement.id: r.outcome.value
        for r in report.results
        if r.requirement.tier is Tier.MANDATORY
    }
    assert set(mandatory.values()) == {"pass"}, mandatory
    # It advertises no session capability and has no tool: those checks are skipped.
    for check_id in ("load.replay", "resume.no-replay", "list.sessions", "close.cancels"):
        assert got[check_id] == "skip", check_id
    assert got["permission.stop"] == "skip"
    # The SDK logs a line that is not JSON and answers nothing.
    assert got["jsonrpc.parse-error"] == "fail"
    assert "answered with nothing" in report.result("jsonrpc.parse-error").detail
    # A second prompt while one runs: the reference agent refuses it.
    assert "-32600" in report.result("prompt.queued").detail
    assert report.exit_code == 0
    assert report.checker_frame_problems == []
    figures = report.result("stop.cancelled").figures
    assert {"first_chunk_ms", "stop_to_response_ms", "chunks_before_stop"} <= set(figures)


def frames_at_fault(report: Report, check_id: str) -> list[dict[str, Any]]:
    result = report.result(check_id)
    return [e.process.transcript[i][1] for e in result.evidence for i in e.marks]


@pytest.mark.slow
async def test_chunks_after_the_cancelled_response_fail_stop_ordering() -> None:
    report = await check([*FAULTY, "--leak", "3"], "stop.ordering")
    result = report.result("stop.ordering")
    assert result.outcome is Outcome.FAIL
    assert result.detail.startswith("3 session/update after the prompt's response")
    at_fault = frames_at_fault(report, "stop.ordering")
    assert at_fault[0]["result"] == {"stopReason": "cancelled"}
    assert [m["params"]["update"]["sessionUpdate"] for m in at_fault[1:]] == [
        "agent_message_chunk"
    ] * 3
    assert report.result("stop.cancelled").outcome is Outcome.PASS
    assert report.exit_code == 1
    text = render_text(report)
    assert "FAIL          stop.ordering" in text
    assert "NOT CONFORMANT: stop.ordering" in text
    assert "> #" in text
    assert '"result":{"stopReason":"cancelled"}' in text


@pytest.mark.slow
async def test_end_turn_answered_to_a_stop_fails_stop_cancelled() -> None:
    report = await check([*FAULTY, "--end-turn"], "stop.cancelled")
    result = report.result("stop.cancelled")
    assert result.outcome is Outcome.FAIL
    assert '{"stopReason": "end_turn"}, not cancelled' in result.detail
    cancel, response = frames_at_fault(report, "stop.cancelled")
    assert cancel["method"] == "session/cancel"
    assert response["result"] == {"stopReason": "end_turn"}
    assert report.result("stop.ordering").outcome is Outcome.PASS
    assert report.exit_code == 1
    assert "NOT CONFORMANT: stop.cancelled" in render_text(report)


@pytest.mark.slow
async def test_a_cancel_lost_behind_the_prompt_fails_stop_race() -> None:
    report = await check([*FAULTY, "--late-register"], "stop.race", stop_timeout=1.5)
    result = report.result("stop.race")
    assert result.outcome is Outcome.FAIL
    assert "was lost" in result.detail
    prompt, cancel = frames_at_fault(report, "stop.race")
    assert (prompt["method"], cancel["method"]) == ("session/prompt", "session/cancel")
    assert report.exit_code == 1


@pytest.mark.slow
async def test_a_cancel_kept_from_an_idle_session_fails_stop_idle() -> None:
    report = await check([*FAULTY, "--sticky-cancel"], "stop.idle")
    assert report.result("stop.idle").outcome is Outcome.FAIL
    assert "kept for the next turn" in report.result("stop.idle").detail
    assert report.result("notification.no-response").outcome is Outcome.PASS
    assert report.exit_code == 1


@pytest.mark.slow
async def test_an_agent_that_dies_on_stop_fails_and_the_run_goes_on() -> None:
    report = await check([*FAULTY, "--crash-on-cancel"], "stop.cancelled", "stop.race")
    got = outcomes(report)
    assert report.result("stop.cancelled").detail.endswith("the agent exited")
    assert got["stop.cancelled"] == "fail"
    assert got["stop.ordering"] == "not exercised"
    assert got["stop.next-turn"] == "fail"
    assert report.result("stop.next-turn").detail.startswith("the scenario broke off")
    assert got["stop.race"] == "fail"
    assert report.exit_code == 1


async def test_a_file_read_without_the_capability_fails_capability_gating() -> None:
    report = await check([*FAULTY, "--read-anyway"], "capability.gating", "stop.race")
    result = report.result("capability.gating")
    assert result.outcome is Outcome.FAIL
    assert "fs/read_text_file" in result.detail
    assert {m["method"] for m in frames_at_fault(report, "capability.gating")} == {
        "fs/read_text_file"
    }
    assert report.exit_code == 1


@pytest.mark.slow
async def test_a_stop_during_a_permission_request_is_answered_cancelled_by_the_checker() -> None:
    report = await check(
        [*FAULTY, "--ask-permission"], "permission.stop", permission_prompt="Write the note."
    )
    result = report.result("permission.stop")
    assert result.outcome is Outcome.PASS, result.detail
    assert result.detail.startswith("the checker answered the request cancelled")
    (process,) = report.processes
    answers = [
        m for d, m in process.transcript if d == "send" and m.get("result", {}).get("outcome")
    ]
    assert [a["result"] for a in answers] == [{"outcome": {"outcome": "cancelled"}}]
    assert report.exit_code == 0


@pytest.mark.slow
async def test_without_a_stream_the_stop_checks_are_not_exercised_and_not_passed() -> None:
    """The reference agent's --one-line mode answers every prompt at once: a Stop
    cannot be tested, and that is not a pass (acplint's cancel tests pass vacuously)."""
    report = await check([*REFERENCE, "--one-line"], "stop.cancelled")
    result = report.result("stop.cancelled")
    assert result.outcome is Outcome.NOT_EXERCISED
    assert "never streamed long enough" in result.detail
    assert report.exit_code == 1


@pytest.mark.slow
async def test_the_json_report_holds_every_wire_whole(tmp_path: Path) -> None:
    report = await check([*FAULTY, "--leak", "2"], "stop.ordering")
    data = render_json(report)
    assert data["exit_code"] == 1
    (ordering,) = [r for r in data["results"] if r["id"] == "stop.ordering"]
    assert ordering["tier"] == "mandatory"
    assert ordering["blocking"] is True
    assert ordering["spec"][0]["source"] == "prompt-turn.mdx, Cancellation"
    (evidence,) = ordering["evidence"]
    wire = data["processes"][evidence["process"]]["wire"]
    assert len(wire) == len(report.processes[0].transcript)
    assert all(wire[i]["direction"] == "recv" for i in evidence["frames"])
    json.dumps(data)  # serializable as it is


@pytest.mark.parametrize(
    "argv",
    [["--stop-after", "0"], ["--only", "no.such.check"], ["--agent-env", "NOEQUALS"]],
)
def test_bad_options_exit_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "check", *argv, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "acp-bridge check" in done.stderr


def test_every_check_is_documented() -> None:
    docs = (ROOT / "docs" / "testing.md").read_text()
    missing = [check_id for check_id in REQUIREMENTS if f"| `{check_id}` |" not in docs]
    assert missing == []


def test_a_program_that_does_not_exist_is_an_option_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "check", "--", "no-such-agent-program"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "cannot run 'no-such-agent-program'" in done.stderr


def test_common_options_before_the_check_name_are_checks() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "acp_bridge", "--log-level", "info", "--state-dir=x"),
            *("check", "--only", "initialize.version"),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "initialize.version" in done.stdout


def test_options_before_the_check_name_are_refused_not_served() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "--provider", "fake", "check"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "give check's options after its name" in done.stderr
    assert done.stdout == ""


RAW = [sys.executable, str(ROOT / "tests" / "faulty_raw_agent.py")]


def never_wrapped(report: Report) -> None:
    """No result hides what happened behind a task group's exception group."""
    for result in report.results:
        assert "ExceptionGroup" not in result.detail, result.detail
        assert "TaskGroup" not in result.detail, result.detail


@pytest.mark.slow
async def test_a_turn_that_ends_before_the_stop_is_not_exercised_not_failed() -> None:
    report = await check([*RAW, "--quick-turn"], "stop.cancelled", "stop.race", "close.cancels")
    got = outcomes(report)
    assert got["stop.cancelled"] == "not exercised", report.result("stop.cancelled").detail
    assert "before session/cancel was sent" in report.result("stop.cancelled").detail
    assert got["stop.ordering"] == "not exercised"
    assert got["stop.next-turn"] == "not exercised"
    assert got["stop.race"] == "not exercised", report.result("stop.race").detail
    assert "end_turn" in report.result("stop.race").detail
    assert got["close.cancels"] == "not exercised", report.result("close.cancels").detail
    assert "before session/close was sent" in report.result("close.cancels").detail


@pytest.mark.slow
async def test_a_turn_that_ends_as_the_stop_crosses_it_is_not_exercised_not_failed() -> None:
    """The agent writes its turn's end once the Stop is on its stdin, before it reads
    it (as acp-bridge's keyless greeting did: 17 chunks in a burst, a Stop after 16):
    answered ``end_turn`` after the cancel was sent, but before the agent answered
    the request the checker sent right behind it.  Nothing was stopped: not a failure
    of the agent (the checker used to fail stop.next-turn and close.cancels)."""
    report = await check([*RAW, "--ends-as-stopped"], "stop.cancelled", "close.cancels", stops=3)
    got = outcomes(report)
    for check_id in ("stop.cancelled", "stop.next-turn", "close.cancels"):
        assert got[check_id] == "not exercised", report.result(check_id).detail
    detail = report.result("stop.cancelled").detail
    assert "before the agent answered the request sent right behind the cancel" in detail
    assert "none stopped a turn mid-stream" in detail
    assert (
        "the last of 20 sessions, none closed mid-stream" in report.result("close.cancels").detail
    )
    # What to do about it, for any agent and for one built on acp-bridge.
    assert "--stream-prompt" in report.result("close.cancels").detail
    assert "--scripted" in report.result("close.cancels").detail
    # Updates after a response are a leak however the turn ended: still watched.
    assert got["stop.ordering"] == "not exercised"  # no Stop stopped anything
    assert report.exit_code == 1  # a mandatory check not exercised is no pass
    never_wrapped(report)


@pytest.mark.slow
async def test_an_agent_that_reads_the_stop_and_ends_its_turn_otherwise_fails() -> None:
    """The request behind the cancel is what tells a crossing from a refusal: the
    SDK agent answers it at once, then ``end_turn``: a failure, decided at once."""
    report = await check([*FAULTY, "--end-turn"], "stop.cancelled")
    result = report.result("stop.cancelled")
    assert result.outcome is Outcome.FAIL, result.detail
    assert "it had read the cancel" in result.detail


@pytest.mark.slow
async def test_a_parse_error_without_an_id_is_named() -> None:
    report = await check([*RAW, "--parse-error-no-id"], "jsonrpc.parse-error")
    result = report.result("jsonrpc.parse-error")
    assert result.outcome is Outcome.FAIL
    assert "-32700" in result.detail
    assert "without an id" in result.detail
    assert "nothing" not in result.detail
    # The sentence cited is a MUST of JSON-RPC's, but it has no other effect than this.
    assert report.result("jsonrpc.bad-input").outcome is Outcome.PASS


@pytest.mark.slow
async def test_an_error_answered_to_a_notification_fails() -> None:
    report = await check([*RAW, "--answer-notifications"], "notification.no-response")
    result = report.result("notification.no-response")
    assert result.outcome is Outcome.FAIL, result.detail
    assert "3 response(s) to notifications" in result.detail
    assert report.exit_code == 1


@pytest.mark.slow
async def test_a_load_that_replays_no_agent_text_fails_load_replay() -> None:
    report = await check([*RAW, "--no-replay-text"], "load.replay")
    result = report.result("load.replay")
    assert result.outcome is Outcome.FAIL, result.detail
    assert "holds no agent text" in result.detail
    assert report.exit_code == 1


@pytest.mark.slow
async def test_an_agent_that_exits_at_once_is_reported_with_its_status_and_stderr() -> None:
    report = await check([*RAW, "--exit-at-once"], "stop.cancelled", "stdout.valid")
    never_wrapped(report)
    detail = report.result("stop.cancelled").detail
    assert report.result("stop.cancelled").outcome is Outcome.FAIL
    assert "closed its stdout" in detail
    assert "status 4" in detail
    assert "no configuration found" in detail
    valid = report.result("stdout.valid")
    assert valid.outcome is Outcome.NOT_EXERCISED, valid.detail
    assert "all 0 frames" not in valid.detail


@pytest.mark.slow
async def test_a_session_new_that_needs_auth_is_reported_with_the_error() -> None:
    report = await check([*RAW, "--needs-auth"], "stop.cancelled")
    never_wrapped(report)
    detail = report.result("stop.cancelled").detail
    assert "session/new failed" in detail
    assert "Authentication required" in detail
    assert report.result("stop.cancelled").evidence[0].process.transcript


async def test_an_agent_that_never_answers_is_reported_with_the_timeout() -> None:
    silent = [sys.executable, "-c", "import time; time.sleep(600)"]
    report = await check(silent, "stop.cancelled", timeout=1.0)
    never_wrapped(report)
    assert "no answer to initialize (id 1) within 1 s" in report.result("stop.cancelled").detail


async def test_a_bare_assertion_of_the_kit_shows_its_line() -> None:
    from acp_bridge.check.runner import broken_off

    async def fails() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0)
            assert 1 + 1 == 3

    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(fails)
    except BaseException as exc:
        told = broken_off(exc)
    assert told.startswith("AssertionError: assert (1 + 1) == 3"), told


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie whose parent has gone does not)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
async def test_a_launchers_child_that_ignores_eof_and_sigterm_is_reported_and_ended(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    launcher = [str(ROOT / "tests" / "launcher_with_child.sh"), *RAW]
    report = await check(launcher, "stdio.eof", exit_timeout=2.0, env={"LEFTOVER_PIDS": str(pids)})
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == len(report.processes) == 2
    assert [pid for pid in started if alive(pid)] == []
    result = report.result("stdio.eof")
    assert result.outcome is Outcome.FAIL, result.detail
    assert "exited when idle but left 1 process(es) of its group running" in result.detail
    assert "exited mid-stream but left 1 process(es)" in result.detail
    assert "sleep 600" in result.detail
    assert all(len(p.survivors) == 1 and "sleep 600" in p.survivors[0] for p in report.processes)
    assert "LEFT RUNNING" in render_text(report)
    assert render_json(report)["processes"][0]["survivors"] == report.processes[0].survivors


@pytest.mark.slow
async def test_an_agent_that_ignores_eof_is_reported_and_ended() -> None:
    report = await check([*RAW, "--ignore-eof"], "stdio.eof", exit_timeout=1.0)
    result = report.result("stdio.eof")
    assert result.outcome is Outcome.FAIL, result.detail
    assert "still running 1 s after stdin closed (idle)" in result.detail
    assert "still running 1 s after stdin closed mid-stream" in result.detail
    never_wrapped(report)
    # Ended by the checker (SIGTERM to its group), nothing of it left.
    assert [p.returncode for p in report.processes] == [-15, -15]
    assert all(p.survivors == [] for p in report.processes)


def test_each_tier_follows_the_sentence_it_cites() -> None:
    for check_id, requirement in REQUIREMENTS.items():
        words = " ".join(q.text for q in requirement.quotes)
        if requirement.tier is Tier.ADVISORY:
            continue
        assert "MUST" in words, check_id
    assert REQUIREMENTS["jsonrpc.method-not-found"].tier is Tier.ADVISORY
    assert REQUIREMENTS["prompt.queued"].tier is Tier.MANDATORY
    assert "MUST reply" in " ".join(q.text for q in REQUIREMENTS["prompt.queued"].quotes)


@pytest.mark.slow
async def test_a_wrong_code_for_an_unknown_method_fails_the_should_only() -> None:
    report = await check([*RAW, "--wrong-code"], "jsonrpc.method-not-found")
    result = report.result("jsonrpc.method-not-found")
    assert result.outcome is Outcome.FAIL
    assert "-32600" in result.detail
    # Answered all the same: the MUST of bad-input holds, the frame is not counted twice.
    assert report.result("jsonrpc.bad-input").outcome is Outcome.PASS
    assert report.exit_code == 0
