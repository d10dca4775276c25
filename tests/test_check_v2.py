"""``acp-bridge check --protocol 2`` against a small ACP v2 agent on the official
TypeScript SDK's v2 agent side (``tests/ts_client/v2_agent.mjs``): the correct
one passes every check; each fault fails the check made for it, by name."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_ts_sdk_client import ts_client  # noqa: F401  (the fixture)

from acp_bridge.check.requirements import Tier
from acp_bridge.check.requirements_v2 import V2_REQUIREMENTS
from acp_bridge.check.results import Outcome
from acp_bridge.check.runner import CheckOptions, Report, run_check
from acp_bridge.check.schema import BUNDLED_V2_SCHEMA
from acp_bridge.client import bridge_command

pytestmark = pytest.mark.anyio

FAST: dict[str, Any] = {
    "watch": 0.3,
    "timeout": 30.0,
    "stop_timeout": 5.0,
    "stream_timeout": 30.0,
    "exit_timeout": 30.0,
    "stops": 3,
    "protocol": 2,
}


async def check_v2(client_dir: Path, tmp: Path, *args: str) -> Report:
    node = shutil.which("node")
    assert node is not None
    agent = [node, str(client_dir / "v2_agent.mjs"), "--store", str(tmp / "store.json"), *args]
    return await run_check(CheckOptions(command=agent, **FAST))


def test_each_v2_quote_is_in_the_v2_schema_and_each_tier_follows_it() -> None:
    schema = json.loads(BUNDLED_V2_SCHEMA.read_text(encoding="utf-8"))
    texts: list[str] = []
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            text = node.get("description")
            if isinstance(text, str):
                texts.append(re.sub(r"\s+", " ", text.replace("`", "")))
            stack.extend(v for k, v in node.items() if k != "description")
        elif isinstance(node, list):
            stack.extend(node)
    for check_id, requirement in V2_REQUIREMENTS.items():
        for quote in requirement.quotes:
            if quote.source.startswith("v2 schema.json"):
                assert any(quote.text in t for t in texts), (check_id, quote.text)
        words = " ".join(q.text for q in requirement.quotes)
        if requirement.tier is not Tier.ADVISORY:
            assert "MUST" in words, check_id
        if requirement.tier is Tier.CAPABILITY:
            assert requirement.applies_if, check_id


@pytest.mark.slow
async def test_the_correct_v2_agent_passes_every_check(
    ts_client: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    report = await check_v2(ts_client, tmp_path)
    outcomes = {r.requirement.id: r.outcome for r in report.results}
    assert set(outcomes) == set(V2_REQUIREMENTS)
    assert set(outcomes.values()) == {Outcome.PASS}, {
        r.requirement.id: r.detail for r in report.results
    }
    assert report.checker_frame_problems == []
    assert report.exit_code == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "check_id"),
    [
        ("chunk-after-idle", "stop.ordering"),
        ("end-turn", "stop.cancelled"),
        ("never-confirm", "stop.cancelled"),
        ("next-turn", "stop.next-turn"),
        ("resume-no-replay", "resume.replay"),
    ],
)
async def test_each_fault_of_the_v2_agent_fails_its_check(
    ts_client: Path,  # noqa: F811
    tmp_path: Path,
    fault: str,
    check_id: str,
) -> None:
    report = await check_v2(ts_client, tmp_path, "--fault", fault)
    assert report.result(check_id).outcome is Outcome.FAIL, report.result(check_id).detail
    assert report.exit_code == 1
    if fault in ("next-turn", "resume-no-replay"):
        # One promise broken: the others still pass.
        assert report.result("stop.cancelled").outcome is Outcome.PASS


@pytest.mark.slow
async def test_the_kit_drives_a_v2_agent(ts_client: Path, tmp_path: Path) -> None:  # noqa: F811
    """The test kit as a v2 client: initialize 2, a prompt answered at once with its
    messageId, a Stop confirmed by idle(cancelled), a resume that replays."""
    from acp_bridge.testing import start_agent

    node = shutil.which("node")
    assert node is not None
    command = [node, str(ts_client / "v2_agent.mjs"), "--store", str(tmp_path / "store.json")]
    async with start_agent(command, workspace=tmp_path) as agent:
        info = await agent.initialize(protocol_version=2)
        assert info["protocolVersion"] == 2
        session = await agent.new_session()
        turn = await session.start_prompt("count")
        await turn.wait_for_chunks(3, within=30)
        result = await turn.stop(within=30)
        assert result.stop_reason == "cancelled"
        assert result.late == []
        assert turn.accepted is not None
        message_id = turn.accepted["result"]["messageId"]
        states = [u.get("state") for u in result.updates if u["sessionUpdate"] == "state_update"]
        assert states == ["running"]
        delivered = result.text()
        await agent.finish(within=30)
    async with start_agent(command, workspace=tmp_path) as agent:
        await agent.initialize(protocol_version=2)
        resumed = await agent.resume_session(session.id, replay_from={"type": "start"})
        kinds = [u["sessionUpdate"] for u in resumed.replayed]
        assert kinds == ["user_message", "agent_message", "state_update"]
        assert resumed.replayed[0]["messageId"] == message_id
        assert resumed.replayed[1]["content"][0]["text"] == delivered
        await agent.finish(within=30)


@pytest.mark.slow
def test_acp_bridge_passes_check_protocol_2(tmp_path: Path) -> None:
    """The real command line against acp-bridge itself over v2 (its scripted provider)."""
    import subprocess
    import sys

    out = tmp_path / "report.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "acp_bridge", "check", "--protocol", "2", "--scripted"),
            *("--watch", "0.3", "--timeout", "30", "--stop-timeout", "30", "--stops", "5"),
            *("--json", str(out), "--", *bridge_command()),
        ],
        capture_output=True,
        text=True,
        timeout=280,
    )
    report = json.loads(out.read_text())
    results = {r["id"]: r for r in report["results"]}
    assert set(results) == set(V2_REQUIREMENTS)
    failed = {k: r["detail"] for k, r in results.items() if r["outcome"] != "pass"}
    assert failed == {}
    assert done.returncode == 0, done.stdout
