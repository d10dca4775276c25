"""notes-agent's sessions, tested with acp-bridge's public test kit only.

The ``acp_agent`` fixture starts notes_agent.py (``acp_bridge_command`` in
pyproject.toml) on a scripted session from ``sessions/``; the kit plays the
editor: it serves files from the test's workspace, answers permissions by a
policy, presses Stop, and snapshots the whole wire.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_bridge.testing import allow_once, reject_once, transcript_snapshot

pytestmark = pytest.mark.anyio

SESSIONS = Path(__file__).resolve().parent.parent / "sessions"


def report(text: str) -> dict[str, object]:
    """The facts of a scripted ``report`` answer (``name: json`` lines)."""
    facts = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep:
            facts[name] = json.loads(value)
    return facts


async def test_count_words(acp_agent, acp_workspace, acp_snapshot):
    """The agent's own tool, through the editor's fs/read_text_file; the whole
    session is snapshotted (tests/__snapshots__/)."""
    (acp_workspace / "poem.txt").write_text("so much depends\nupon a red wheel barrow\n")
    async with acp_agent.bridge(script=SESSIONS / "count-words.json") as agent:
        await agent.initialize()
        session = await agent.new_session()
        result = await session.prompt("How many words are in poem.txt?")
        assert result.stop_reason == "end_turn"
        assert report(result.text())["tool_results"][0]["text"] == "8 words"
        assert "fs/read_text_file" in agent.editor.methods()
        assert await agent.finish() == 0
    assert transcript_snapshot(agent) == acp_snapshot


async def test_stop_keeps_what_was_shown(acp_agent):
    """Stop mid-story: the answer is cancelled, nothing arrives after it, and the
    next request to the model holds exactly the text the user saw."""
    async with acp_agent.bridge(script=SESSIONS / "story.json") as agent:
        await agent.initialize()
        session = await agent.new_session()
        stopped = await session.prompt("Tell me a story", stop_after=4)
        assert stopped.stop_reason == "cancelled"
        assert stopped.late == []
        shown = stopped.text()
        assert shown.startswith("Once upon")
        follow_up = await session.prompt("Go on")
        assert report(follow_up.text()) == {
            "last_assistant_text": shown,
            "last_assistant_interrupted": True,
        }
        assert await agent.finish() == 0


@pytest.mark.parametrize(("policy", "written"), [(allow_once, True), (reject_once, False)])
async def test_add_note_asks_first(acp_agent, acp_workspace, policy, written):
    async with acp_agent.bridge(script=SESSIONS / "add-note.json") as agent:
        agent.permissions = policy()
        await agent.initialize()
        session = await agent.new_session()
        result = await session.prompt("Remember to buy milk")
        assert result.stop_reason == "end_turn"
        (request,) = agent.permission_requests
        assert request.tool_call["title"] == "Add a note: buy milk"
        (tool_result,) = report(result.text())["tool_results"]
        assert tool_result["is_error"] is not written
        assert await agent.finish() == 0
    notes = acp_workspace / "NOTES.md"
    assert (notes.read_text() if notes.exists() else None) == ("- buy milk\n" if written else None)
