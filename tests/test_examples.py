"""Every example script serves a conversation: three prompts through the real subprocess.

No example may fail a later message with ``script exhausted``.  The Zed
example (``story-then-report.json``) ends its first turn on its own, is paced
slowly enough to press Stop, and a Stop mid-story still reaches the model as
an interrupted message.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from raw_bridge import RawBridge

from acp_bridge.cli import build_parser
from acp_bridge.log.check import check_history, check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_valid_records, session_path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
STORY = EXAMPLES / "story-then-report.json"

# What each of three prompts ends with: a stop reason, or "error:<kind>" for a
# scripted provider error.  "cancelled" means the test presses Stop after a
# few chunks (the example streams until stopped).
EXPECTED: dict[str, list[str]] = {
    "endless.json": ["cancelled", "cancelled", "cancelled"],
    "hello.json": ["end_turn", "end_turn", "end_turn"],
    "provider-error.json": ["error:overloaded", "end_turn", "end_turn"],
    "reasoning.json": ["end_turn", "end_turn", "end_turn"],
    "story-then-report.json": ["end_turn", "end_turn", "end_turn"],
    "tool-call.json": ["end_turn", "end_turn", "end_turn"],
}


def test_every_example_has_expectations() -> None:
    assert set(EXPECTED) == {path.name for path in EXAMPLES.glob("*.json")}


def _outcome(answer: dict[str, Any]) -> str:
    if "error" in answer:
        assert "exhausted" not in json.dumps(answer["error"]), answer
        return f"error:{answer['error'].get('data', {}).get('kind')}"
    reason: str = answer["result"]["stopReason"]
    return reason


def _check_session(bridge: RawBridge, session_id: str) -> None:
    records = read_valid_records(session_path(str(bridge.state_dir), session_id))
    check_log(records)
    check_history(derive_messages(records))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_example_serves_three_prompts(tmp_path: Path, name: str) -> None:
    with RawBridge(tmp_path, "--script", str(EXAMPLES / name)) as bridge:
        bridge.initialize()
        session_id = bridge.new_session()
        outcomes = []
        for turn, expected in enumerate(EXPECTED[name], start=1):
            since = len(bridge.seen)
            prompt = bridge.prompt(session_id, f"message {turn}")
            if expected == "cancelled":
                while len(bridge.chunks(session_id, since)) < 5:
                    bridge.next_message()
                bridge.notify("session/cancel", {"sessionId": session_id})
            outcomes.append(_outcome(bridge.response(prompt)))
            if not expected.startswith("error"):
                assert bridge.chunks(session_id, since), f"turn {turn} streamed nothing"
        assert outcomes == EXPECTED[name]
        assert bridge.close() == 0
        _check_session(bridge, session_id)


def _report(bridge: RawBridge, session_id: str, since: int) -> dict[str, Any]:
    text = "".join(bridge.chunks(session_id, since))
    facts = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return {key: json.loads(value) for key, value in facts.items()}


def test_the_zed_example_ends_on_its_own_and_reports_the_whole_story(tmp_path: Path) -> None:
    with RawBridge(tmp_path, "--script", str(STORY)) as bridge:
        bridge.initialize()
        session_id = bridge.new_session()
        first = bridge.prompt(session_id, "Tell me a story.")
        assert bridge.response(first)["result"] == {"stopReason": "end_turn"}
        story = "".join(bridge.chunks(session_id))
        assert story.endswith("The end.")
        since = len(bridge.seen)
        second = bridge.prompt(session_id, "What did you say?")
        assert bridge.response(second)["result"] == {"stopReason": "end_turn"}
        report = _report(bridge, session_id, since)
        assert report["last_assistant_text"] == story
        assert report["last_assistant_interrupted"] is False
        assert bridge.close() == 0


def test_the_zed_example_still_shows_stop(tmp_path: Path) -> None:
    with RawBridge(tmp_path, "--script", str(STORY)) as bridge:
        bridge.initialize()
        session_id = bridge.new_session()
        first = bridge.prompt(session_id, "Tell me a story.")
        bridge.wait_for_chunks(session_id, 14)
        bridge.notify("session/cancel", {"sessionId": session_id})
        assert bridge.response(first)["result"] == {"stopReason": "cancelled"}
        shown = "".join(bridge.chunks(session_id))
        assert not shown.endswith("The end.")
        since = len(bridge.seen)
        second = bridge.prompt(session_id, "Go on")
        assert bridge.response(second)["result"] == {"stopReason": "end_turn"}
        report = _report(bridge, session_id, since)
        assert report["last_assistant_text"] == shown
        assert report["last_assistant_interrupted"] is True
        assert bridge.close() == 0


def test_the_zed_example_is_paced_for_a_person_to_press_stop() -> None:
    """Checked on the script, not on a clock: its first answer is scripted to last seconds."""
    script = json.loads(STORY.read_text())
    events = script["responses"][0]["events"]
    assert all("hang" not in event and "endless" not in event for event in events)
    scripted_ms = sum(
        math.ceil(len(event["text"]) / event["chunk_size"]) * event["chunk_delay_ms"]
        for event in events
        if "text" in event
    )
    assert scripted_ms >= 5_000


def test_the_readme_zed_snippet_is_the_current_form_and_runs_the_zed_example() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text()
    section = readme.split("## Use it from Zed", 1)[1].split("\n## ", 1)[0]
    snippet = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    entry = snippet["agent_servers"]["acp-bridge"]
    assert entry["type"] == "custom"  # what Zed's current documentation shows
    assert entry["command"].endswith("/bin/acp-bridge")
    options = build_parser().parse_args(entry["args"])
    assert options.provider == "fake"
    assert Path(options.script).name == STORY.name
