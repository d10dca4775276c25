"""Notices: a retried model request is an ACP ``notice`` only for a client that
advertised ``session.notices`` (the others get the thought chunk they always
got), and a load does not replay it (notices are live only)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_pinned_sdk_schema
from harness import cwd_for_tests
from provider_server import Reply, WireServer, anthropic_text
from support.bridge import running_bridge

from acp_bridge.client import AcpClient, bridge_command
from acp_bridge.notices import wants_notices
from acp_bridge.update_builders import notice_update

pytestmark = pytest.mark.anyio

CWD = cwd_for_tests()
NO_FS = {"fs": {"readTextFile": False, "writeTextFile": False}}
WITH_NOTICES = {**NO_FS, "session": {"notices": {}}}


def limited() -> Reply:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    return Reply(status=429, headers={"retry-after": "1"}, body=json.dumps(body).encode())


async def session_with_a_retry(
    tmp_path: Path, capabilities: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], AcpClient]:
    """A prompt whose first request is rate limited, then a load in a new process:
    the prompt's updates, the replayed updates, and the second client."""
    state = tmp_path / "state"
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-key"}
    replies = [limited(), Reply(anthropic_text(["Fine."])), Reply(anthropic_text(["Fine."]))]
    with WireServer(replies) as server:
        command = bridge_command(
            "--provider", "anthropic", "--base-url", server.url, "--state-dir", str(state)
        )
        async with running_bridge(command, env=env) as client:
            with anyio.fail_after(30):
                await client.initialize(capabilities)
                sid = await client.new_session(CWD)
                result = await client.prompt(sid, "Hi")
            await client.finish(within=15)
        assert result.stop_reason == "end_turn"
        async with running_bridge(command, env=env) as second:
            with anyio.fail_after(30):
                await second.initialize(capabilities)
                start = len(second.updates)
                answer = await second.request(
                    "session/load", {"sessionId": sid, "cwd": CWD, "mcpServers": []}
                )
                assert "result" in answer
                replayed = second.updates[start:]
            await second.finish(within=15)
    schema = load_pinned_sdk_schema()
    assert schema is not None
    schema.check_transcript(client.transcript)
    schema.check_transcript(second.transcript)
    return result.updates, replayed, second


def notice_chunks(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        u
        for u in updates
        if u["sessionUpdate"] == "agent_thought_chunk"
        and (u.get("_meta") or {}).get("acpBridge", {}).get("notice")
    ]


async def test_a_retry_is_a_notice_for_a_client_that_opted_in(tmp_path: Path) -> None:
    live, replayed, _ = await session_with_a_retry(tmp_path, WITH_NOTICES)
    (notice,) = [u for u in live if u["sessionUpdate"] == "notice"]
    assert notice["severity"] == "warning"
    assert notice["title"] == "Retrying the model request"
    assert notice["description"].startswith("The model request failed (")
    assert "Slow down" in notice["description"]
    assert notice_chunks(live) == []
    # Live only: the load shows neither the notice nor a thought chunk for it.
    assert [u for u in replayed if u["sessionUpdate"] == "notice"] == []
    assert notice_chunks(replayed) == []


async def test_without_the_capability_a_retry_stays_a_thought_chunk(tmp_path: Path) -> None:
    live, replayed, _ = await session_with_a_retry(tmp_path, NO_FS)
    assert [u for u in live if u["sessionUpdate"] == "notice"] == []
    (chunk,) = notice_chunks(live)
    assert "Slow down" in chunk["content"]["text"]
    assert notice_chunks(replayed) == [chunk]


def test_the_capability_and_the_update() -> None:
    assert wants_notices({"session": {"notices": {}}})
    assert not wants_notices({"session": {"notices": None}})
    assert not wants_notices({"session": {}})
    assert not wants_notices(None)
    assert notice_update("error", "MCP server db failed", None) == {
        "sessionUpdate": "notice",
        "severity": "error",
        "title": "MCP server db failed",
    }
