"""One reader, one verdict: a log ``acp-bridge history`` refuses, ``session/load`` refuses too.

A completed compaction record with a negative ``kept_from``, a ``pinned`` list
that is not of sequence numbers, or an object as its summary was refused by
``history`` (the record models) but loaded by ``session/load``, whose model
then saw a history the log does not describe.  Through the real subprocess.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from support.bridge import BridgeStarter

from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

BAD: list[tuple[str, Any]] = [
    ("kept_from", -3),
    ("pinned", ["x", -1]),
    ("summary", {"text": "an object"}),
]


def append_compaction(path: Path, field: str, value: Any) -> None:
    records = read_records(path)
    seq, turn = len(records), max(r["turn"] for r in records)
    head = {"v": records[0]["v"], "at": 1.0, "type": "compaction", "turn": turn, "step": 0}
    started = {**head, "seq": seq, "compaction_id": "c1", "attempt": "a1", "status": "in_progress"}
    done = {
        **head,
        "seq": seq + 1,
        "compaction_id": "c1",
        "attempt": "a1",
        "status": "completed",
        "summary": "A summary.",
        "kept_from": 0,
        "pinned": [],
        field: value,
    }
    with path.open("ab") as f:
        f.write(orjson.dumps(started) + b"\n" + orjson.dumps(done) + b"\n")


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f for f, _ in BAD])
async def test_a_corrupt_compaction_is_refused_by_history_and_by_load(
    tmp_path: Path, bridge: BridgeStarter, field: str, value: Any
) -> None:
    state = tmp_path / "state"
    async with bridge() as client:
        await client.initialize()
        session_id = await client.new_session(str(tmp_path))
        done = await client.prompt(session_id, "Hello")
        assert done.stop_reason == "end_turn"
        assert await client.finish() == 0
    append_compaction(state / "sessions" / f"{session_id}.jsonl", field, value)
    with anyio.fail_after(60):
        history = await anyio.run_process(
            [sys.executable, "-m", "acp_bridge", "history", session_id, "--state-dir", str(state)],
            check=False,
        )
    assert history.returncode == 1, history
    assert "corrupt session log" in history.stderr.decode()
    async with bridge() as client:
        await client.initialize()
        loaded = await client.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
        error = loaded.get("error")
        assert error is not None, loaded
        assert "damaged and cannot be loaded" in error["message"]
        assert "(record type compaction)" in error["message"], error
        # Still serving.
        assert (await client.new_session(str(tmp_path))).startswith("sess_")
        assert await client.finish() == 0
