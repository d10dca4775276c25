"""Plans by id, through the real subprocess, for both kinds of client.

A client that advertises ``clientCapabilities.plan`` is offered the plan tool
that keeps plans by id: the scripted model keeps two plans of steps and one of
Markdown, removes one (and fails to remove one that does not exist), and the
editor gets ``plan_update`` (items and markdown forms, with the ``planId``)
and ``plan_removed``, never a whole-list ``plan``.  Loaded again, the session
replays its plans in the form the loading client takes: one ``plan_update``
per plan, or, for a client without the capability, one ``plan`` of the
entries of every list plan; that client's own ``update_plan`` then keeps the
other plans in its whole list.  (A client without the capability in a session
of its own sees exactly what it saw before plans had ids: tests/test_plan.py
and its snapshot.)  Every frame, both ways, is checked against the unstable
schema of the pinned SDK, the one that defines these shapes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_schema import load_pinned_sdk_schema, load_pinned_sdk_unstable_schema
from harness import Run, run_bridge, tool_call, write_script

from acp_bridge.client import AcpClient

pytestmark = pytest.mark.anyio

PLAN_CAPS = {"fs": {"readTextFile": False, "writeTextFile": False}, "plan": {}}

FIRST = [
    {"content": "Read the failing test", "status": "in_progress", "priority": "high"},
    {"content": "Fix the parser", "status": "pending", "priority": "high"},
]
SECOND = [
    {"content": "Read the failing test", "status": "completed", "priority": "high"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
]
LATER = [{"content": "Update the changelog", "status": "pending", "priority": "low"}]
THIRD = [{"content": "Fix the parser", "status": "completed", "priority": "high"}]
REVIEW = "# Review\n- [ ] read the diff\n- [ ] run the tests"
NOTES = "Keep the public API unchanged."

SCRIPT = {
    "responses": [
        {"events": [tool_call("c1", "update_plan", entries=FIRST)]},
        {"events": [tool_call("c2", "update_plan", plan_id="review", markdown=REVIEW)]},
        {"events": [tool_call("c3", "update_plan", plan_id="main", entries=SECOND)]},
        {"events": [tool_call("c4", "update_plan", plan_id="review", remove=True)]},
        {"events": [tool_call("c5", "update_plan", plan_id="nope", remove=True)]},
        {"events": [tool_call("c6", "update_plan", plan_id="later", entries=LATER)]},
        {"events": [tool_call("c7", "update_plan", plan_id="notes", markdown=NOTES)]},
        # Two forms at once is refused, and shows nothing.
        {"events": [tool_call("c8", "update_plan", plan_id="x", entries=[], remove=True)]},
        {"events": [{"text": "On it."}]},
    ],
}
NO_PLANS = {"responses": [{"events": [{"text": "Loaded."}]}]}
AGAIN = {
    "responses": [
        {"events": [tool_call("d1", "update_plan", entries=THIRD)]},
        {"events": [{"text": "Done."}]},
    ]
}


def plan_frames(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = ("plan", "plan_update", "plan_removed")
    return [u for u in updates if u["sessionUpdate"] in kinds]


def items(plan_id: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    plan = {"type": "items", "planId": plan_id, "entries": entries}
    return {"sessionUpdate": "plan_update", "plan": plan}


def markdown(plan_id: str, content: str) -> dict[str, Any]:
    plan = {"type": "markdown", "planId": plan_id, "content": content}
    return {"sessionUpdate": "plan_update", "plan": plan}


def check_frames(run: Run, *, stable: bool = False) -> None:
    transcript = run.client.transcript
    unstable = load_pinned_sdk_unstable_schema()
    unstable.check_transcript(transcript)
    assert unstable.sent_errors(transcript) == []
    if stable:  # a client without the capability gets only what v1 has
        load_pinned_sdk_schema().check_transcript(transcript)


async def load(client: AcpClient, sid: str, cwd: Path) -> None:
    response = await client.request(
        "session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}
    )
    assert "result" in response, response


async def test_plans_by_id_live_and_replayed_for_both_kinds_of_client(tmp_path: Path) -> None:
    state = tmp_path / "state"
    sid: list[str] = []
    results: list[Any] = []

    async def first(client: AcpClient) -> None:
        await client.initialize(PLAN_CAPS)
        sid.append(await client.new_session(str(tmp_path)))
        results.append(await client.prompt(sid[0], "Fix the parser bug"))

    one = await run_bridge(write_script(tmp_path, SCRIPT), state, first)
    one.check_logs()
    check_frames(one)
    (result,) = results
    assert result.stop_reason == "end_turn"
    assert plan_frames(result.updates) == [
        items("main", FIRST),
        markdown("review", REVIEW),
        items("main", SECOND),
        {"sessionUpdate": "plan_removed", "planId": "review"},
        items("later", LATER),
        markdown("notes", NOTES),
    ]
    records = one.logs()[sid[0]]
    outcomes = {r["tool_call_id"]: r["is_error"] for r in records if r["type"] == "tool/result"}
    assert outcomes == {f"c{i}": i in (5, 8) for i in range(1, 9)}
    (nope,) = [r for r in records if r["type"] == "tool/result" and r["tool_call_id"] == "c5"]
    assert "there is no plan 'nope'" in nope["content"][0]["text"]

    # Loaded by a client that keeps plans by id: each plan, in its own form.
    async def by_id(client: AcpClient) -> None:
        await client.initialize(PLAN_CAPS)
        await load(client, sid[0], tmp_path)

    two = await run_bridge(write_script(tmp_path, NO_PLANS), state, by_id)
    check_frames(two)
    assert plan_frames(two.client.updates) == [
        items("main", SECOND),
        items("later", LATER),
        markdown("notes", NOTES),
    ]

    # Loaded by a client without the capability: one whole list of them all;
    # its own update_plan keeps the other list plans in that list.
    later: list[Any] = []

    async def whole(client: AcpClient) -> None:
        await client.initialize()
        await load(client, sid[0], tmp_path)
        later.append(await client.prompt(sid[0], "Go on"))

    three = await run_bridge(write_script(tmp_path, AGAIN), state, whole)
    three.check_logs()
    check_frames(three, stable=True)
    replayed = plan_frames(three.client.updates)
    assert replayed[0] == {"sessionUpdate": "plan", "entries": SECOND + LATER}
    assert plan_frames(later[0].updates) == [{"sessionUpdate": "plan", "entries": THIRD + LATER}]
    assert len(replayed) == 2  # the replay's, then the live one
