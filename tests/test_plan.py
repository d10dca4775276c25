"""The plan: a scripted model calls ``update_plan`` twice; the editor gets two
``plan`` updates (the whole list each time) without a permission prompt, the
calls are logged, and ``session/load`` in a new process replays the latest
plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_schema import AcpSchema, load_pinned_sdk_schema
from harness import SessionSnapshot, normalize, run_bridge, tool_call, write_script
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import AcpClient, PromptResult

pytestmark = pytest.mark.anyio

FIRST = [
    {"content": "Read the failing test", "status": "in_progress", "priority": "high"},
    {"content": "Fix the parser", "status": "pending", "priority": "high"},
    {"content": "Update the changelog", "status": "pending", "priority": "low"},
]
SECOND = [
    {"content": "Read the failing test", "status": "completed", "priority": "high"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"content": "Update the changelog", "status": "pending", "priority": "low"},
]
SCRIPT = {
    "responses": [
        {"events": [tool_call("call_1", "update_plan", entries=FIRST)]},
        {"events": [tool_call("call_2", "update_plan", entries=SECOND)]},
        # An invalid plan is refused and never shown.
        {"events": [tool_call("call_3", "update_plan", entries=[{"content": "x"}])]},
        {"events": [{"text": "On it."}]},
    ],
    "when_exhausted": "repeat_last",
}


def plans(updates: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [u["entries"] for u in updates if u["sessionUpdate"] == "plan"]


async def test_plan_is_shown_logged_and_replayed(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    state = tmp_path / "state"
    sid: list[str] = []
    results: list[PromptResult] = []
    asked: list[Any] = []

    async def first(client: AcpClient) -> None:
        async def permission(params: dict[str, Any]) -> dict[str, Any]:
            asked.append(params)
            return {"outcome": {"outcome": "cancelled"}}

        client.handlers["session/request_permission"] = permission
        await client.initialize()
        sid.append(await client.new_session(str(tmp_path)))
        results.append(await client.prompt(sid[0], "Fix the parser bug"))

    one = await run_bridge(write_script(tmp_path, SCRIPT), state, first)
    one.check_logs()
    (result,) = results
    assert result.stop_reason == "end_turn"
    assert asked == []  # no permission prompt
    assert plans(result.updates) == [FIRST, SECOND]
    records = one.logs()[sid[0]]
    calls = [r for r in records if r["type"] == "tool/call"]
    assert [(c["name"], c["status"]) for c in calls] == [
        ("update_plan", "dispatched"),
        ("update_plan", "dispatched"),
        ("update_plan", "refused"),
    ]
    assert calls[1]["input"] == {"entries": SECOND}

    async def second(client: AcpClient) -> None:
        await client.initialize()
        response = await client.request(
            "session/load", {"sessionId": sid[0], "cwd": str(tmp_path), "mcpServers": []}
        )
        assert "result" in response

    two = await run_bridge(write_script(tmp_path, SCRIPT), state, second, mode="inprocess")
    replayed = plans(two.client.updates)
    assert replayed == [SECOND]  # the latest plan, once
    ts_schema = load_pinned_sdk_schema()
    assert ts_schema is not None
    for run in (one, two):
        acp_schema.check_transcript(run.client.transcript)
        ts_schema.check_transcript(run.client.transcript)
    wire = normalize(
        [list(entry) for entry in one.client.transcript], paths={str(tmp_path): "<tmp>"}
    )
    assert wire == snapshot.use_extension(SessionSnapshot)
