"""Slash commands through the real subprocess (the keyless provider).

The commands are announced right after ``session/new`` (and load and
resume); each simple command answers with visible text and ``end_turn``
without a model request; an unknown ``/word`` is text for the model; ``/clear``
starts the model's history over while the log (and ``acp-bridge show``)
keeps the older turns, and a load in a new process replays all of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_schema import AcpSchema, load_pinned_sdk_schema
from harness import SessionSnapshot, cwd_for_tests, write_script
from syrupy.assertion import SnapshotAssertion

from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing import NO_CAPABILITIES, AgentLauncher, transcript_snapshot

pytestmark = pytest.mark.anyio

CWD = cwd_for_tests()
REPORT = ["message_count", "first_user_text", "last_user_text"]
NAMES = ["regenerate", "compact", "model", "mode", "status", "clear", "help"]


def script() -> dict[str, Any]:
    return {
        "responses": [
            {"events": [{"text": "The capital of France is Paris."}]},
            {"events": [{"report": REPORT}]},
        ],
        "when_exhausted": "repeat_last",
    }


def commands_of(update: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in update["availableCommands"]}


async def test_commands_right_after_session_new(
    acp_agent: AgentLauncher, tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    async with acp_agent.bridge(script=write_script(tmp_path, script())) as agent:
        await agent.initialize(NO_CAPABILITIES)
        session = await agent.new_session(CWD)
        # A cheap request as a barrier: whatever followed session/new has arrived.
        await agent.request("session/list", {})
        await agent.finish(within=15)
    wire = [m for d, m in agent.transcript if d == "recv"]
    new_at = next(i for i, m in enumerate(wire) if m.get("result", {}).get("sessionId"))
    follows = wire[new_at + 1]
    assert follows["method"] == "session/update"
    assert follows["params"]["sessionId"] == session.id
    update = follows["params"]["update"]
    assert update["sessionUpdate"] == "available_commands_update"
    commands = commands_of(update)
    assert list(commands) == NAMES
    # A hint where the command takes words; none where it does not.
    assert {name for name, c in commands.items() if "input" in c} == {"compact", "model", "mode"}
    ts_schema = load_pinned_sdk_schema()
    assert ts_schema is not None
    ts_schema.check_transcript(agent.transcript)
    assert transcript_snapshot(agent, paths={CWD: "<cwd>"}) == snapshot.use_extension(
        SessionSnapshot
    )


async def test_each_command_answers(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    reports = {"responses": [{"events": [{"report": REPORT}]}], "when_exhausted": "repeat_last"}
    async with acp_agent.bridge(script=write_script(tmp_path, reports)) as agent:
        await agent.initialize(NO_CAPABILITIES)
        session = await agent.new_session(CWD)
        results = {}
        for command in (
            "/help",
            "/status",
            "/model",
            "/model gpt-nonexistent",
            "/mode",
            "/mode read_only",
            "/mode sideways",
        ):
            results[command] = await session.prompt(command)
        unknown = await session.prompt("/frobnicate the widget")
        await agent.finish(within=15)
    for command, result in results.items():
        assert result.stop_reason == "end_turn", command
        assert result.text().strip(), f"{command} answered nothing visible"
    assert results["/help"].text().startswith("Commands:")
    for name in NAMES:
        assert f"/{name}" in results["/help"].text()
    status = results["/status"].text()
    assert f"Session: {session.id}" in status
    assert "Mode: ask" in status
    assert "Context: about" in status
    assert agent.state_dir is not None
    log_path = agent.state_dir / "sessions" / f"{session.id}.jsonl"
    assert f"Log: {log_path}" in status
    assert "offers no other model" in results["/model"].text()
    assert "No model 'gpt-nonexistent'" in results["/model gpt-nonexistent"].text()
    assert results["/mode"].text().startswith("Mode: ask")
    switched = results["/mode read_only"]
    assert switched.text().startswith("Switched to read_only mode")
    kinds = [u["sessionUpdate"] for u in switched.updates]
    assert "current_mode_update" in kinds
    assert "config_option_update" in kinds
    assert results["/mode sideways"].text().startswith("No mode 'sideways'")
    # An unknown /word is the user's text for the model.
    assert parse_report(unknown.text())["last_user_text"] == "/frobnicate the widget"
    records = next(iter(agent.logs().values()))
    # No model request for a command: the only stream is the unknown word's.
    assert len([r for r in records if r["type"] == "stream/start"]) == 1
    answers = [r for r in records if r["type"] == "command/answer"]
    assert len(answers) == len(results)
    acp_schema.check_transcript(agent.transcript)
    data = transcript_snapshot(agent, logs=True, history=True, paths={CWD: "<cwd>"})
    # The estimate counts the system prompt, which names this machine's system.
    text = re.sub(
        r"Context: about [\d,]+ of [\d,]+ tokens \(\d+%\)", "Context: <used>", json.dumps(data)
    )
    assert json.loads(text) == snapshot.use_extension(SessionSnapshot)


def show(state_dir: Path, session_id: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "acp_bridge", "show", session_id, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_clear_starts_the_model_history_over(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    async with acp_agent.bridge(script=write_script(tmp_path, script())) as agent:
        await agent.initialize(NO_CAPABILITIES)
        session = await agent.new_session(CWD)
        await session.prompt("What is the capital of France?")
        before = await session.prompt("And its river?")
        cleared = await session.prompt("/clear")
        after = await session.prompt("Where were we?")
        again = await session.prompt("/clear")
        await agent.finish(within=15)
    assert parse_report(before.text())["message_count"] == 3
    assert cleared.stop_reason == "end_turn"
    assert "no longer sees the 4 earlier messages" in cleared.text()
    fresh = parse_report(after.text())
    assert fresh["message_count"] == 1
    assert fresh["first_user_text"] == "Where were we?"
    assert "no longer sees the 2 earlier messages" in again.text()
    records = next(iter(agent.logs().values()))
    assert [r["command"] for r in records if r["type"] == "turn/start" and "command" in r] == [
        "clear",
        "clear",
    ]
    # The log keeps every turn; show lists them.
    assert agent.state_dir is not None
    shown = show(agent.state_dir, session.id)
    for text in ("What is the capital of France?", "And its river?", "Where were we?"):
        assert text in shown
    # A load in a new process replays the older turns and the command's answer.
    reports = {"responses": [{"events": [{"report": REPORT}]}], "when_exhausted": "repeat_last"}
    async with acp_agent.bridge(script=write_script(tmp_path, reports)) as second:
        await second.initialize(NO_CAPABILITIES)
        loaded = await second.load_session(session.id, CWD)
        history = await loaded.prompt("Anything else?")
        await second.finish(within=15)
    replayed = [u for u in loaded.replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in replayed] == [
        "What is the capital of France?",
        "And its river?",
        "/clear",
        "Where were we?",
        "/clear",
    ]
    answers = [
        u["content"]["text"]
        for u in loaded.replayed
        if u.get("_meta", {}).get("acpBridge", {}).get("command")
    ]
    assert answers == [cleared.text(), again.text()]
    # What the model is sent after the load: only what came after the last /clear.
    assert parse_report(history.text())["message_count"] == 1
    acp_schema.check_transcript(agent.transcript)
    acp_schema.check_transcript(second.transcript)
    assert transcript_snapshot(
        agent, logs=True, history=True, paths={CWD: "<cwd>"}
    ) == snapshot.use_extension(SessionSnapshot)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/regenerate", ("regenerate", "")),
        ("  /regenerate \n", ("regenerate", "")),
        ("/regenerate it please", None),  # words after it: text for the model
        ("/compact", ("compact", "")),
        ("/compact  keep   the  names", ("compact", "keep   the  names")),
        ("/compact\nkeep the names", ("compact", "keep the names")),
        ("/model  big   one", ("model", "big one")),
        ("/clear", ("clear", "")),
        ("/frobnicate the widget", None),
        ("hello /help", None),
    ],
)
def test_a_prompt_names_a_command_one_way(text: str, parsed: tuple[str, str] | None) -> None:
    """One parser tells a command's prompt from a prompt for the model, for every
    kind of command turn (a regenerate, a compaction, a simple command)."""
    from acp_bridge.commands.catalog import parse

    assert parse([{"type": "text", "text": text}]) == parsed
    assert parse([{"type": "text", "text": text}, {"type": "text", "text": "more"}]) is None
