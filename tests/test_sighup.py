"""SIGHUP (the terminal or the parent went away) is a disconnect, like SIGTERM.

Without a handler, SIGHUP kills Python on the spot: no ``turn/end`` and no
answer.  It must stop the running turn as *disconnected*, answer the prompt,
write the log and exit 0.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from support.harness import EXAMPLES

from acp_bridge.client import bridge_command, prompt_params, running
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio


async def test_sighup_mid_stream_is_recorded_as_disconnected(tmp_path: Path) -> None:
    state = tmp_path / "state"
    command = bridge_command(
        "--provider", "fake", "--script", str(EXAMPLES / "endless.json"), "--state-dir", str(state)
    )
    async with running(command) as client:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        params = prompt_params(session, "go on forever")
        prompt = await client.send_request("session/prompt", params)
        await client.wait_until(lambda: len(client.updates) >= 20)
        client.agent.send_signal(signal.SIGHUP)
        answer = await client.wait_response(prompt)
        assert answer["result"] == {"stopReason": "cancelled"}
        assert await client.finish() == 0
        assert client.messages[-1] == answer, "frames after the prompt response"
    records = read_records(state / "sessions" / f"{session}.jsonl")
    check_log(records)
    last = records[-1]
    assert (last["type"], last["reason"]) == ("turn/end", "disconnected")
    assert [r["outcome"] for r in records if r["type"] == "assistant/attempt"] == ["disconnected"]
