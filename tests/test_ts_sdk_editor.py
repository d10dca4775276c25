"""The official TypeScript SDK as an editor that shows plans and answers questions.

``tests/ts_client/editor_client.mjs`` advertises form elicitation and
notices; the bridge's scripted model shows a plan and asks a question.  The
SDK validates what it receives (an update it cannot parse is dropped, a
request it cannot parse is refused), so the summary holding the commands, the
plan and the question is the check.  Skips (with the reason) like
``test_ts_sdk_client.py`` when Node or the SDK is unavailable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp_schema import load_pinned_sdk_schema
from harness import ROOT, tool_call
from test_ts_sdk_client import RUN_TIMEOUT_S, ts_client  # noqa: F401  (the fixture)

from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

PLAN = [
    {"content": "Choose the database", "status": "in_progress", "priority": "high"},
    {"content": "Write the schema", "status": "pending", "priority": "medium"},
]


@pytest.fixture(scope="module")
def ts_editor_run(ts_client: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("ts-editor")
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_plan", "update_plan", entries=PLAN),
                    tool_call(
                        "call_ask", "ask_user", question="Which database?", choices=["sqlite", "pg"]
                    ),
                ]
            },
            {"events": [{"report": ["tool_results"]}]},
        ]
    }
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps(script))
    frames = tmp / "frames.jsonl"
    node = shutil.which("node")
    assert node is not None
    agent = [sys.executable, "-m", "acp_bridge", "--provider", "fake", "--script", str(script_path)]
    agent += ["--state-dir", str(tmp / "state")]
    command = [node, str(ts_client / "editor_client.mjs"), "--frames", str(frames)]
    command += ["--cwd", str(tmp), "--", *agent]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=dict(os.environ),
        cwd=ROOT,
    )
    summary: dict[str, Any] = json.loads(result.stdout)
    assert "error" not in summary, summary["error"] + result.stderr[-2000:]
    summary["stderr"] = result.stderr
    summary["frames"] = [json.loads(line) for line in frames.read_text().splitlines()]
    summary["logs"] = [read_records(p) for p in (tmp / "state" / "sessions").glob("*.jsonl")]
    return summary


def test_the_sdk_parses_the_commands_the_plan_and_the_question(
    ts_editor_run: dict[str, Any],
) -> None:
    run = ts_editor_run
    assert run["exit"] == 0
    assert run["response"] == {"stopReason": "end_turn"}
    kinds = [u["sessionUpdate"] for u in run["updates"]]
    assert kinds[0] == "available_commands_update"
    (plan,) = [u for u in run["updates"] if u["sessionUpdate"] == "plan"]
    assert plan["entries"] == PLAN
    (asked,) = run["requests"]
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["mode"] == "form"
    assert asked["params"]["toolCallId"] == "call_ask"
    # Nothing was refused or dropped by the SDK's validation.
    assert "Error handling" not in run["stderr"], run["stderr"][-2000:]
    text = "".join(
        u["content"]["text"] for u in run["updates"] if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "The user answered: chose 'sqlite'" in text


def test_the_frames_are_valid_acp(ts_editor_run: dict[str, Any]) -> None:
    schema = load_pinned_sdk_schema()
    transcript = [
        ("send" if f["dir"] == "send" else "recv", json.loads(f["line"]))
        for f in ts_editor_run["frames"]
    ]
    schema.check_transcript(transcript)
    for records in ts_editor_run["logs"]:
        check_log(records)
