"""`children_of`: the subagent sessions ``session/delete`` removes with a session."""

from __future__ import annotations

from pathlib import Path

import orjson

from acp_bridge.stored.info import children_of


def _log(state: Path, session_id: str, owner: str | None) -> None:
    start: dict[str, object] = {
        "v": 1,
        "seq": 0,
        "at": 0.0,
        "type": "session/start",
        "turn": 0,
        "step": 0,
        "session_id": session_id,
        "cwd": "/",
        "provider": "scripted",
        "title": None,
    }
    if owner is not None:
        start["owner"] = {"session_id": owner, "tool_call": "call_1", "depth": 1}
    (state / "sessions").mkdir(parents=True, exist_ok=True)
    (state / "sessions" / f"{session_id}.jsonl").write_bytes(orjson.dumps(start) + b"\n")


def test_children_deepest_first(tmp_path: Path) -> None:
    _log(tmp_path, "sess_a", None)
    _log(tmp_path, "sess_b", "sess_a")
    _log(tmp_path, "sess_c", "sess_b")
    _log(tmp_path, "sess_d", "sess_a")
    _log(tmp_path, "sess_e", None)
    assert children_of(str(tmp_path), "sess_a") == ["sess_c", "sess_b", "sess_d"]
    assert children_of(str(tmp_path), "sess_b") == ["sess_c"]
    assert children_of(str(tmp_path), "sess_e") == []


def test_a_loop_in_the_owner_links_never_makes_a_session_its_own_child(tmp_path: Path) -> None:
    """Logs whose owners name each other (hand-edited, damaged): the session
    asked about is never among its children, or its delete would lock its own
    log twice and be refused."""
    _log(tmp_path, "sess_a", "sess_b")
    _log(tmp_path, "sess_b", "sess_a")
    _log(tmp_path, "sess_s", "sess_s")
    assert children_of(str(tmp_path), "sess_a") == ["sess_b"]
    assert children_of(str(tmp_path), "sess_s") == []
