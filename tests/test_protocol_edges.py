"""Protocol edges through the real subprocess: bounded echoes and a cwd with NUL."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.bridge import BridgeStarter

from acp_bridge.acp.params import ECHO_LIMIT, echo

pytestmark = pytest.mark.anyio

HUGE = "x" * 100_000


def test_echo_cuts_long_values() -> None:
    assert echo("abc") == "'abc'"
    cut = echo(HUGE)
    assert len(cut) == ECHO_LIMIT
    assert cut.startswith("'xxx")
    assert cut.endswith("…")


async def test_error_messages_do_not_echo_a_huge_value(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    async with bridge() as client:
        await client.initialize()
        session_id = await client.new_session("/")
        unknown = await client.request(
            "session/prompt", {"sessionId": HUGE, "prompt": [{"type": "text", "text": "hi"}]}
        )
        bad_type = await client.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": HUGE}]}
        )
        for answer, field in ((unknown, "sessionId"), (bad_type, "prompt[0].type")):
            error = answer["error"]
            assert error["code"] == -32602
            assert error["data"]["field"] == field
            assert len(orjson.dumps(error)) < 600, len(orjson.dumps(error))
            assert "xxx…" in error["message"]
        # Still serving.
        assert (await client.new_session("/")).startswith("sess_")
        assert await client.finish() == 0


async def test_a_cwd_with_nul_is_refused_and_nothing_is_stored(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    async with bridge() as client:
        await client.initialize()
        answer = await client.request("session/new", {"cwd": "/tmp/a\x00b", "mcpServers": []})
        error = answer["error"]
        assert error["code"] == -32602
        assert error["data"]["field"] == "cwd"
        assert "NUL" in error["message"]
        sessions = tmp_path / "state" / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
        assert (await client.new_session("/tmp")).startswith("sess_")
        assert await client.finish() == 0


async def test_session_new_wants_a_cwd_that_is_an_existing_directory(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    script = tmp_path / "a-file.json"
    script.write_text("{}")
    async with bridge() as client:
        await client.initialize()
        for cwd in (str(tmp_path / "no-such-directory"), str(script)):
            answer = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
            error = answer["error"]
            assert error["code"] == -32602
            assert error["data"]["field"] == "cwd"
            assert "must be an existing directory" in error["message"]
        sessions = tmp_path / "state" / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
        assert (await client.new_session(str(tmp_path))).startswith("sess_")
        assert await client.finish() == 0


async def test_a_bad_script_is_the_error_of_session_new(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"responses": [{"events": [{"tetx": "hi"}]}]}')
    async with bridge("--script", str(script)) as client:
        init = await client.initialize()
        assert init["result"]["protocolVersion"] == 1
        for _ in range(2):  # the first session/new and every later one
            answer = await client.request("session/new", {"cwd": "/", "mcpServers": []})
            error = answer["error"]
            assert error["code"] == -32603
            assert f"{script}: responses[0].events[0]" in error["message"]
            assert error["data"]["kind"] == "startup"
        assert client.agent.returncode is None  # still serving, not a silent exit
        sessions = tmp_path / "state" / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
        assert await client.finish() == 2
    stderr = (tmp_path / "stderr.txt").read_text()
    assert stderr.count(f"{script}: responses[0].events[0]") == 1
    assert "Traceback" not in stderr


async def test_fork_params_are_checked_like_session_new(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    """A fork's directories and cwd get the checks session/new gives them."""
    async with bridge() as client:
        await client.initialize()
        session_id = await client.new_session("/")
        bad_dirs = await client.request(
            "session/fork",
            {"sessionId": session_id, "cwd": "/", "additionalDirectories": ["relative/dir"]},
        )
        nul_cwd = await client.request(
            "_acp-bridge/fork_at_turn", {"sessionId": session_id, "turn": 1, "cwd": "/a\0b"}
        )
        missing = str(tmp_path / "no-such-directory")
        missing_cwd = await client.request(
            "session/fork", {"sessionId": session_id, "cwd": missing}
        )
        missing_at_turn = await client.request(
            "_acp-bridge/fork_at_turn", {"sessionId": session_id, "turn": 1, "cwd": missing}
        )
        for answer, field in (
            (bad_dirs, "additionalDirectories[0]"),
            (nul_cwd, "cwd"),
            (missing_cwd, "cwd"),
            (missing_at_turn, "cwd"),
        ):
            assert answer["error"]["code"] == -32602
            assert answer["error"]["data"]["field"] == field
        assert await client.finish() == 0
    assert [p.name for p in (tmp_path / "state" / "sessions").glob("*.jsonl")] == [
        f"{session_id}.jsonl"
    ]
