"""Every example script serves a conversation: three prompts through the real subprocess.

No example may fail a later message with ``script exhausted``.  The Zed
example (``story-then-report.json``) ends its first turn on its own, is paced
slowly enough to press Stop, and a Stop mid-story still reaches the model as
an interrupted message.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from support.bridge import start_bridge

from acp_bridge.cli import build_parser
from acp_bridge.client import AcpClient, RequestId, prompt_params
from acp_bridge.log.check import check_history, check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_valid_records, session_path
from acp_bridge.providers.scripted import parse_report

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


@asynccontextmanager
async def bridge(tmp_path: Path, script: Path) -> AsyncIterator[AcpClient]:
    """The bridge on ``script``, initialized, its state in ``tmp_path/state``."""
    async with start_bridge(
        tmp_path / "state", script=script, stderr=tmp_path / "stderr.txt"
    ) as client:
        await client.initialize()
        yield client


def chunks(client: AcpClient, session_id: str, since: int = 0) -> list[str]:
    """The text of the message chunks of a session received from ``messages[since]`` on."""
    return [
        m["params"]["update"]["content"]["text"]
        for m in client.messages[since:]
        if m.get("method") == "session/update"
        and m["params"]["sessionId"] == session_id
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]


async def prompt(client: AcpClient, session_id: str, text: str) -> RequestId:
    params = prompt_params(session_id, text)
    return await client.send_request("session/prompt", params)


async def stop_after(client: AcpClient, session_id: str, count: int, since: int = 0) -> None:
    """Press Stop once ``count`` chunks arrived (from ``messages[since]`` on)."""
    await client.wait_until(lambda: len(chunks(client, session_id, since)) >= count)
    await client.notify("session/cancel", {"sessionId": session_id})


def _check_session(tmp_path: Path, session_id: str) -> None:
    records = read_valid_records(session_path(str(tmp_path / "state"), session_id))
    check_log(records)
    check_history(derive_messages(records))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name",
    # The story waits between its chunks (seconds): CI plays it.
    [
        pytest.param(n, marks=pytest.mark.slow) if n == "story-then-report.json" else n
        for n in sorted(EXPECTED)
    ],
)
async def test_an_example_serves_three_prompts(tmp_path: Path, name: str) -> None:
    async with bridge(tmp_path, EXAMPLES / name) as client:
        session_id = await client.new_session("/")
        outcomes = []
        for turn, expected in enumerate(EXPECTED[name], start=1):
            since = len(client.messages)
            rid = await prompt(client, session_id, f"message {turn}")
            if expected == "cancelled":
                await stop_after(client, session_id, 5, since)
            outcomes.append(_outcome(await client.wait_response(rid)))
            if not expected.startswith("error"):
                assert chunks(client, session_id, since), f"turn {turn} streamed nothing"
        assert outcomes == EXPECTED[name]
        assert await client.finish() == 0
    _check_session(tmp_path, session_id)


def _report(client: AcpClient, session_id: str, since: int) -> dict[str, Any]:
    return parse_report("".join(chunks(client, session_id, since)))


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_zed_example_ends_on_its_own_and_reports_the_whole_story(tmp_path: Path) -> None:
    async with bridge(tmp_path, STORY) as client:
        session_id = await client.new_session("/")
        first = await prompt(client, session_id, "Tell me a story.")
        assert (await client.wait_response(first))["result"] == {"stopReason": "end_turn"}
        story = "".join(chunks(client, session_id))
        assert story.endswith("The end.")
        since = len(client.messages)
        second = await prompt(client, session_id, "What did you say?")
        assert (await client.wait_response(second))["result"] == {"stopReason": "end_turn"}
        report = _report(client, session_id, since)
        assert report["last_assistant_text"] == story
        assert report["last_assistant_interrupted"] is False
        assert await client.finish() == 0


@pytest.mark.anyio
async def test_the_zed_example_still_shows_stop(tmp_path: Path) -> None:
    async with bridge(tmp_path, STORY) as client:
        session_id = await client.new_session("/")
        first = await prompt(client, session_id, "Tell me a story.")
        await stop_after(client, session_id, 14)
        assert (await client.wait_response(first))["result"] == {"stopReason": "cancelled"}
        shown = "".join(chunks(client, session_id))
        assert not shown.endswith("The end.")
        since = len(client.messages)
        second = await prompt(client, session_id, "Go on")
        assert (await client.wait_response(second))["result"] == {"stopReason": "end_turn"}
        report = _report(client, session_id, since)
        assert report["last_assistant_text"] == shown
        assert report["last_assistant_interrupted"] is True
        assert await client.finish() == 0


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


def test_every_zed_snippet_of_the_readme_tags_its_entries_custom() -> None:
    """Zed loads an ``agent_servers`` entry only with ``"type": "custom"``: every
    snippet says it (the README's and the real-model ones of docs/providers.md),
    and each entry's args parse."""
    root = EXAMPLES.parent
    readme = (root / "README.md").read_text() + (root / "docs" / "providers.md").read_text()
    blocks = readme.split("```json")
    snippets = [
        json.loads(block.split("```", 1)[0])
        for before, block in itertools.pairwise(blocks)
        if '"agent_servers"' in block.split("```", 1)[0]
        # JetBrains' acp.json has no "type": its snippet is introduced by that file's name.
        and "acp.json" not in before.rstrip().rsplit("\n\n", 1)[-1]
    ]
    assert len(snippets) >= 3
    entries = [entry for snippet in snippets for entry in snippet["agent_servers"].values()]
    assert len(entries) >= 7
    for entry in entries:
        assert entry["type"] == "custom", entry
        if entry["command"] == "uvx":
            # The published distribution, started with no subcommand.
            assert entry["args"][0] == "acp-bridge-agent", entry
            build_parser().parse_args(entry["args"][1:])
        else:
            assert entry["command"].endswith("/bin/acp-bridge"), entry
            build_parser().parse_args(entry["args"])


@pytest.mark.slow
def test_the_readme_counts_the_fast_tier_about_right() -> None:
    """The README says how many tests a plain ``pytest`` runs ("about 1,450"): within a
    tenth of what ``pytest --collect-only`` counts, or the sentence is stale."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    stated = re.search(r"runs the fast tier \(about ([\d,]+) tests", readme)
    assert stated is not None, "the README no longer states the fast tier's size"
    said = int(stated.group(1).replace(",", ""))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
    )
    counted = re.search(r"(\d+)(?:/\d+)? tests? collected", done.stdout)
    assert counted is not None, done.stdout[-500:] + done.stderr[-500:]
    fast = int(counted.group(1))
    assert abs(fast - said) <= fast / 10, f"README says about {said}; the fast tier has {fast}"
