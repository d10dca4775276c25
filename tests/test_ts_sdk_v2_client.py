"""The official TypeScript SDK 2.4.0's ACP v2 client (``tests/ts_client/v2_client.mjs``)
runs a session against acp-bridge: a prompt that streams, a Stop confirmed by
``idle(cancelled)`` with every chunk before it, a follow-up whose request holds
the interrupted text, a command the agent runs itself after a permission, and
a ``session/resume`` with replay in a new process.  Every frame the bridge
writes validates against the v2 schema.

Node and the SDK are installed as for the v1 client (`test_ts_sdk_client`): the
test skips without them, or fails when ``CI`` is true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from acp_schema import load_acp_v2_schema, load_acp_v2_unstable_schema
from support.harness import tool_call, write_script
from test_ts_sdk_client import RUN_TIMEOUT_S, ts_client

from acp_bridge.providers.scripted import parse_report

__all__ = ["ts_client"]

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "Hello from the interrupted message"
ASKED = ["last_user_text", "last_assistant_text", "last_assistant_interrupted"]


COMMAND = [{"events": [tool_call("call_1", "run_command", command="echo ts-v2-ran")]}]
# The third prompt's model hands the command to a subagent, whose answer is the result.
SUBAGENT = [
    {"events": [tool_call("call_1", "task", description="Run it", prompt="Run it")]},
    {"events": [tool_call("c_cmd", "run_command", command="echo ts-v2-ran")]},
    {"events": [{"text": "The subagent saw ts-v2-ran."}]},
]


def _script(tmp_path: Path, third: list[dict[str, Any]]) -> Path:
    return write_script(
        tmp_path,
        {
            "when_exhausted": "repeat_last",
            "responses": [
                {"events": [{"text": PREFIX, "chunk_size": 5}, {"hang": True}]},
                {"events": [{"report": ASKED}]},
                *third,
                {"events": [{"report": ["tool_results"]}]},
            ],
        },
    )


def _run(
    client_dir: Path,
    tmp_path: Path,
    name: str,
    *extra: str,
    third: list[dict[str, Any]] = COMMAND,
) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    node = shutil.which("node")
    assert node is not None
    frames_file = tmp_path / f"{name}.jsonl"
    agent = [sys.executable, "-m", "acp_bridge", "--provider", "fake"]
    agent += ["--script", str(_script(tmp_path, third)), "--state-dir", str(tmp_path / "state")]
    command = [node, str(client_dir / "v2_client.mjs"), "--frames", str(frames_file)]
    command += ["--cwd", str(tmp_path / "project"), *extra, "--", *agent]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=dict(os.environ),
        cwd=ROOT,
        check=False,
    )
    summary = json.loads(result.stdout)
    assert result.returncode == 0, f"{summary.get('error')}\n{result.stderr[-3000:]}"
    frames = [json.loads(line) for line in frames_file.read_text(encoding="utf-8").splitlines()]
    transcript = [(f["dir"], json.loads(f["line"])) for f in frames]
    schema = load_acp_v2_schema() if third is COMMAND else load_acp_v2_unstable_schema()
    schema.check_transcript(transcript)
    return summary, transcript


def test_the_v2_sdk_client_runs_a_session(ts_client: Path, tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    first, transcript = _run(ts_client, tmp_path, "first", "--cancel-after", "2")
    assert first["initialize"]["protocolVersion"] == 2
    # The Stop: idle(cancelled), every chunk of the turn before it, under one id.
    assert first["stopReason"] == "cancelled"
    delivered = first["stoppedText"]
    assert delivered
    assert PREFIX.startswith(delivered)
    assert len(first["stoppedMessageIds"]) == 1
    # None after it: the follow-up's first update is its own running state.
    assert first["followUpFirst"] == {"sessionUpdate": "state_update", "state": "running"}
    facts = parse_report(first["followUpText"])
    assert facts["last_assistant_text"] == delivered
    assert facts["last_assistant_interrupted"] is True
    # The command, run by the agent itself after the permission.
    assert first["commandStopReason"] == "end_turn"
    assert [p["subject"]["toolCall"]["toolCallId"] for p in first["permissions"]] == ["call_1"]
    results = parse_report(first["commandText"])["tool_results"]
    assert "ts-v2-ran" in results[0]["text"]
    assert not any(msg.get("method", "").startswith(("terminal/", "fs/")) for _, msg in transcript)

    # A resume with replay in a new process: the same ids, the same text.
    again, _ = _run(ts_client, tmp_path, "resume", "--resume", first["sessionId"])
    replayed = again["replayed"]
    users = [u["messageId"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
    assert users[:2] == [first["firstMessageId"], first["secondMessageId"]]
    agent = [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"]
    assert agent[0]["messageId"] == first["stoppedMessageIds"][0]
    assert agent[0]["content"]["text"] == delivered


def test_the_v2_sdk_client_runs_a_session_with_a_subagent(ts_client: Path, tmp_path: Path) -> None:
    """v2 requires no capability for subagents: the official client (its
    stable entry point) takes the child's announcement and messages, answers
    the permission the child asks under its own id, and the parent's turn
    ends with the child's answer as the ``task`` call's result."""
    (tmp_path / "project").mkdir()
    first, _ = _run(ts_client, tmp_path, "subagent", "--cancel-after", "2", third=SUBAGENT)
    assert first["commandStopReason"] == "end_turn"
    kinds = [u["sessionUpdate"] for u in first["commandUpdates"]]
    assert "subagent_update" in kinds
    (announce,) = [u for u in first["commandUpdates"] if u["sessionUpdate"] == "subagent_update"]
    asked = [(p["sessionId"], p["subject"]["toolCall"]["toolCallId"]) for p in first["permissions"]]
    assert asked == [(announce["sessionId"], "c_cmd")]
    results = parse_report(first["commandText"])["tool_results"]
    assert results[0]["text"] == "The subagent saw ts-v2-ran."
