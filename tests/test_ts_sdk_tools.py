"""The official TypeScript SDK as an editor that serves files and terminals.

``tests/ts_client/tools_client.mjs`` implements the SDK client's fs and
terminal handlers on a temporary workspace and allows each permission once;
the bridge's scripted model reads a file, edits it, and runs a command that
shows the edit.  Skips (with the reason) like ``test_ts_sdk_client.py`` when
Node or the SDK is unavailable.
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
from acp_schema import load_acp_schema
from support.harness import ROOT, tool_call
from test_ts_sdk_client import RUN_TIMEOUT_S, ts_client  # noqa: F401  (the fixture)

from acp_bridge.log.check import check_history, check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records


@pytest.fixture(scope="module")
def ts_tools_run(ts_client: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("ts-tools")
    workspace = tmp / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("buy milk\n")
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Let me look."},
                    tool_call("call_read", "read_file", path="notes.txt"),
                    tool_call(
                        "call_edit",
                        "edit_file",
                        path="notes.txt",
                        old_text="milk",
                        new_text="bread",
                    ),
                    tool_call("call_run", "run_command", command="cat notes.txt"),
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
    command = [node, str(ts_client / "tools_client.mjs"), "--frames", str(frames)]
    command += ["--cwd", str(workspace), "--", *agent]
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
    summary["workspace"] = workspace
    summary["frames"] = [json.loads(line) for line in frames.read_text().splitlines()]
    summary["logs"] = [read_records(p) for p in (tmp / "state" / "sessions").glob("*.jsonl")]
    return summary


def test_the_session_ends_and_the_agent_exits(ts_tools_run: dict[str, Any]) -> None:
    assert ts_tools_run["response"] == {"stopReason": "end_turn"}
    assert ts_tools_run["exit"] == 0
    assert ts_tools_run["openTerminals"] == 0


def test_read_edit_and_command_ran_in_model_order_through_the_sdk(
    ts_tools_run: dict[str, Any],
) -> None:
    methods = [r["method"] for r in ts_tools_run["requests"]]
    assert methods == [
        "fs/read_text_file",
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "session/request_permission",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    assert (ts_tools_run["workspace"] / "notes.txt").read_text() == "buy bread\n"
    results = json.loads(ts_tools_run["text"].partition("tool_results: ")[2])
    assert [r["tool_call_id"] for r in results] == ["call_read", "call_edit", "call_run"]
    assert results[0]["text"] == "buy milk\n"
    assert results[2]["text"] == "$ cat notes.txt\nbuy bread\n[exit code 0]"
    assert not any(r["is_error"] for r in results)


def test_tool_updates_reach_the_sdk_with_diff_and_terminal(ts_tools_run: dict[str, Any]) -> None:
    updates = [u for u in ts_tools_run["updates"] if u["sessionUpdate"].startswith("tool_call")]
    final = {u["toolCallId"]: u for u in updates if u.get("status") in ("completed", "failed")}
    assert {k: v["status"] for k, v in final.items()} == dict.fromkeys(
        ["call_read", "call_edit", "call_run"], "completed"
    )
    assert final["call_edit"]["content"][0]["type"] == "diff"
    assert final["call_run"]["content"][0] == {"type": "terminal", "terminalId": "term_1"}


def test_frames_are_valid_acp_and_the_log_checks(ts_tools_run: dict[str, Any]) -> None:
    schema = load_acp_schema()
    schema.check_transcript([(f["dir"], json.loads(f["line"])) for f in ts_tools_run["frames"]])
    (records,) = ts_tools_run["logs"]
    check_log(records)
    check_history(derive_messages(records))
