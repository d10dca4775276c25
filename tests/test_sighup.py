"""SIGHUP (the terminal or the parent went away) is a disconnect, like SIGTERM.

Without a handler, SIGHUP kills Python on the spot: no ``turn/end`` and no
answer.  It must stop the running turn as *disconnected*, answer the prompt,
write the log and exit 0.
"""

from __future__ import annotations

import signal
from pathlib import Path

from harness import EXAMPLES
from sync_bridge import Bridge

from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records


def test_sighup_mid_stream_is_recorded_as_disconnected(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bridge = Bridge("--script", str(EXAMPLES / "endless.json"), "--state-dir", str(state))
    session = bridge.start_session(str(tmp_path))
    prompt = bridge.prompt_nowait(session, "go on forever")
    for _ in range(20):
        bridge.wait_for_update()
    bridge.proc.send_signal(signal.SIGHUP)
    answer = bridge.wait_for(prompt)
    assert answer["result"] == {"stopReason": "cancelled"}
    assert bridge.wait() == 0
    assert bridge.received[-1] == answer, "frames after the prompt response"
    records = read_records(state / "sessions" / f"{session}.jsonl")
    check_log(records)
    last = records[-1]
    assert (last["type"], last["reason"]) == ("turn/end", "disconnected")
    assert [r["outcome"] for r in records if r["type"] == "assistant/attempt"] == ["disconnected"]
