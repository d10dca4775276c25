"""A session log that cannot be written: nothing is lost, and the editor is told.

The fault is real, not mocked: the bridge runs with a file-size limit
(RLIMIT_FSIZE), so appending past it fails with EFBIG exactly as a full disk
fails with ENOSPC.  Raising the limit from outside (prlimit) is "the disk has
space again".
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import size_limited_env, start_bridge
from support.harness import write_script

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="needs Linux prlimit to lift the limit again"
    ),
]

LIMIT = 3000  # bytes: session/start and a first short turn fit, a long answer does not

SCRIPT: dict[str, Any] = {
    "responses": [
        {"events": [{"text": "Short."}]},
        {"events": [{"text": "A long answer. " * 40, "chunk_size": 15}]},
        {"events": [{"report": ["message_count", "last_assistant_text"]}]},
    ],
    "when_exhausted": "repeat_last",
}


async def test_full_log_keeps_records_in_memory_and_writes_them_later(tmp_path: Path) -> None:
    script = write_script(tmp_path, SCRIPT)
    state = tmp_path / "state"
    stderr_path = tmp_path / "stderr.txt"
    async with start_bridge(
        state, script=script, stderr=stderr_path, env=size_limited_env()
    ) as client:
        pid = client.agent.pid
        # Before the first request, so before any log exists.
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))
        with anyio.fail_after(30):
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            first = await client.prompt(sid, "Hi")
            assert first.stop_reason == "end_turn"
            # This answer pushes the log past the limit: the turn itself
            # completes (the editor saw it), and its response says the log
            # could not be written.
            second = await client.prompt(sid, "Tell me more")
            assert second.stop_reason == "end_turn"
            assert second.text() == "A long answer. " * 40
            # The failure may be noticed only after the response went out;
            # either way the next prompt is refused with a clear error.
            third = await client.request(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "And then?"}]},
            )
            error = third.get("error")
            assert error is not None, (
                f"a prompt was accepted while the log cannot be written: {third}"
            )
            assert error["code"] == -32603
            assert "Cannot write the session log" in error["message"]
            assert error["data"]["pendingBytes"] > 0
            log_path = Path(error["data"]["path"])
            on_disk = (await anyio.Path(log_path).stat()).st_size
            assert on_disk <= LIMIT

            # The disk has space again.
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
            fourth = await client.prompt(sid, "And then?")
            assert fourth.stop_reason == "end_turn"
            # The model saw every earlier turn, including the one written late.
            assert "message_count: 5" in fourth.text(), fourth.text()
            assert "A long answer. A long answer." in fourth.text()
        assert await client.finish(within=15) == 0

    records = read_records(log_path)
    check_log(records)
    history = derive_messages(records)
    users = [m for m in history if m["role"] == "user"]
    assert [m["content"][0]["text"] for m in users] == ["Hi", "Tell me more", "And then?"]
    assistants = [m for m in history if m["role"] == "assistant"]
    assert assistants[1]["content"][0]["text"] == "A long answer. " * 40
    stderr_text = stderr_path.read_text()
    assert "cannot write" in stderr_text, stderr_text
    assert "keeping" in stderr_text, stderr_text
    assert "writable again" in stderr_text, stderr_text
    # The refused prompt started nothing: no turn was logged for it.
    assert sum(1 for r in records if r["type"] == "turn/start") == 3
