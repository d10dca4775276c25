"""Protocol edges through the real subprocess: bounded echoes and a cwd with NUL."""

from __future__ import annotations

from pathlib import Path

import orjson
from raw_bridge import RawBridge

from acp_bridge.acp.params import ECHO_LIMIT, echo

HUGE = "x" * 100_000


def test_echo_cuts_long_values() -> None:
    assert echo("abc") == "'abc'"
    cut = echo(HUGE)
    assert len(cut) == ECHO_LIMIT
    assert cut.startswith("'xxx")
    assert cut.endswith("…")


def test_error_messages_do_not_echo_a_huge_value(tmp_path: Path) -> None:
    with RawBridge(tmp_path) as bridge:
        bridge.initialize()
        session_id = bridge.new_session()
        unknown = bridge.call(
            "session/prompt", {"sessionId": HUGE, "prompt": [{"type": "text", "text": "hi"}]}
        )
        bad_type = bridge.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": HUGE}]}
        )
        for answer, field in ((unknown, "sessionId"), (bad_type, "prompt[0].type")):
            error = answer["error"]
            assert error["code"] == -32602
            assert error["data"]["field"] == field
            assert len(orjson.dumps(error)) < 600, len(orjson.dumps(error))
            assert "xxx…" in error["message"]
        # Still serving.
        assert bridge.new_session().startswith("sess_")
        assert bridge.close() == 0


def test_a_cwd_with_nul_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    with RawBridge(tmp_path) as bridge:
        bridge.initialize()
        answer = bridge.call("session/new", {"cwd": "/tmp/a\x00b", "mcpServers": []})
        error = answer["error"]
        assert error["code"] == -32602
        assert error["data"]["field"] == "cwd"
        assert "NUL" in error["message"]
        sessions = bridge.state_dir / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
        assert bridge.new_session("/tmp").startswith("sess_")
        assert bridge.close() == 0


def test_a_bad_script_is_the_error_of_session_new(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"responses": [{"events": [{"tetx": "hi"}]}]}')
    with RawBridge(tmp_path, "--script", str(script)) as bridge:
        init = bridge.initialize()
        assert init["result"]["protocolVersion"] == 1
        for _ in range(2):  # the first session/new and every later one
            answer = bridge.call("session/new", {"cwd": "/", "mcpServers": []})
            error = answer["error"]
            assert error["code"] == -32603
            assert f"{script}: responses[0].events[0]" in error["message"]
            assert error["data"]["kind"] == "startup"
        assert bridge.proc.poll() is None  # still serving, not a silent exit
        sessions = bridge.state_dir / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
        assert bridge.close() == 2
        stderr = bridge.stderr_text()
        assert stderr.count(f"{script}: responses[0].events[0]") == 1
        assert "Traceback" not in stderr
