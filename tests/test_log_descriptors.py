"""Many sessions, few file descriptors.

An idle session holds no descriptor: the bridge keeps only a share of its
descriptor limit of log files open and opens the others again when they are
written.  Running out of descriptors anyway is a clear error, answered in one
line on stderr, and the process keeps serving.  Through the real subprocess,
with a lowered RLIMIT_NOFILE for the bridge.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import write_script

from acp_bridge.client import AcpClient, bridge_command, prompt_params, running
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")

LIMIT = 64
SESSIONS = 2 * LIMIT  # more sessions than the process may open files

SCRIPT: dict[str, Any] = {
    "responses": [{"events": [{"text": "Hello there."}]}],
    "when_exhausted": "repeat_last",
}


def lowest_free_fd(pid: int) -> int:
    """The descriptor number the process's next open would get."""
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    fd = 0
    while fd in used:
        fd += 1
    return fd


async def answer(client: AcpClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return await client.request(method, params)


def assert_out_of_descriptors(reply: dict[str, Any], method: str) -> None:
    error = reply.get("error")
    assert error is not None, reply
    assert error["code"] == -32603
    assert "Too many open files" in error["message"], error
    assert error["message"] != "Internal error"
    if method == "session/list":
        assert error["data"]["kind"] == "too_many_open_files", error


def test_more_sessions_than_descriptors(tmp_path: Path) -> None:
    state = tmp_path / "state"
    err = tmp_path / "stderr.txt"
    command = bridge_command(
        "--script", str(write_script(tmp_path, SCRIPT)), "--state-dir", str(state)
    )
    new = {"cwd": str(tmp_path), "mcpServers": []}

    async def drive() -> list[str]:
        async with running(command, stderr=err) as client:
            await client.initialize()
            pid = client.agent.pid
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
            sessions = [await client.new_session(str(tmp_path)) for _ in range(SESSIONS)]
            assert len(os.listdir(f"/proc/{pid}/fd")) < LIMIT
            for session in (sessions[0], sessions[-1], sessions[0]):
                reply = await client.request("session/prompt", prompt_params(session, "Hi"))
                assert reply["result"]["stopReason"] == "end_turn", reply
            listed = await answer(client, "session/list", {})
            assert len(listed["result"]["sessions"]) >= 50, listed  # a full first page

            # No descriptor left at all: the next open would get a number
            # at or over the limit.
            free = lowest_free_fd(pid)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (free, LIMIT))
            assert_out_of_descriptors(await answer(client, "session/list", {}), "session/list")
            assert_out_of_descriptors(await answer(client, "session/new", new), "session/new")
            # A prompt to a session whose log was closed makes room among the
            # logs kept open, and goes on.
            reply = await client.request("session/prompt", prompt_params(sessions[1], "Hi"))
            assert reply["result"]["stopReason"] == "end_turn", reply

            resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
            assert "result" in await answer(client, "session/list", {})
            sessions.append(await client.new_session(str(tmp_path)))
            reply = await client.request("session/prompt", prompt_params(sessions[-1], "Hi"))
            assert reply["result"]["stopReason"] == "end_turn", reply
            assert await client.finish() == 0
            return sessions

    sessions = anyio.run(drive)
    stderr = err.read_text()
    assert "Traceback" not in stderr, stderr
    for session in sessions:
        records = read_records(state / "sessions" / f"{session}.jsonl")
        check_log(records)
    prompted = (sessions[0], sessions[1], sessions[-2], sessions[-1])
    turns = [
        sum(r["type"] == "turn/end" for r in read_records(state / "sessions" / f"{s}.jsonl"))
        for s in prompted
    ]
    assert turns == [2, 1, 1, 1]
