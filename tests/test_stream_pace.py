"""Through the real subprocess: the stdout bound follows how fast the editor reads.

An editor that reads whatever the pipe holds, in bursts, gets a bigger pipe
(and more than the small pipe at once in a read); one that reads a page a
millisecond keeps the small pipe, and after its Stop little is read before
the answer.  Either way the interrupted message is exactly the text it read
(invariant I2).  The editor here is a raw reader of the pipe (``os.read``
at its own pace), so that its pace is the test's, not a client library's.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.harness import EXAMPLES

from acp_bridge.client import bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.transport.outbox import HIGH_WATER, STDOUT_PIPE_SIZE

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "F_GETPIPE_SZ"), reason="Linux pipes")

HANG_GUARD = 60.0  # seconds: a bound on the whole play, not a speed limit
PROMPT_ID = 3


class RawEditor:
    """The bridge on pipes; stdout read with ``os.read`` at the caller's pace."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = tmp_path / "state"
        command = bridge_command(
            "--provider",
            "fake",
            "--script",
            str(EXAMPLES / "endless.json"),
            "--state-dir",
            str(self.state),
        )
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.received = bytearray()
        self.deadline = time.monotonic() + HANG_GUARD
        self.cwd = str(tmp_path)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", **message}) + b"\n")
        self.proc.stdin.flush()

    def read(self, size: int) -> bytes:
        assert time.monotonic() < self.deadline, "the bridge stopped streaming"
        data = os.read(self.fd, size)
        assert data, "the bridge closed stdout"
        self.received += data
        return data

    def pipe_size(self) -> int:
        return int(fcntl.fcntl(self.fd, fcntl.F_GETPIPE_SZ))

    def messages(self) -> list[dict[str, Any]]:
        lines = bytes(self.received).split(b"\n")
        return [orjson.loads(line) for line in lines[:-1]]

    def answered(self, rid: int) -> bool:
        return b'"id":%d,' % rid in self.received or b'"id":%d}' % rid in self.received

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"id": rid, "method": method, "params": params})
        while not self.answered(rid):
            self.read(1 << 16)
        return next(m for m in self.messages() if m.get("id") == rid)

    def start_prompt(self) -> str:
        self.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session = self.request(2, "session/new", {"cwd": self.cwd, "mcpServers": []})
        sid: str = session["result"]["sessionId"]
        self.send(
            {
                "id": PROMPT_ID,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
            }
        )
        return sid

    def finish(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def check_stop(self) -> None:
        """The turn answered ``cancelled``, and the interrupted message is the text read."""
        messages = self.messages()
        (answer,) = [m for m in messages if m.get("id") == PROMPT_ID]
        assert answer["result"]["stopReason"] == "cancelled"
        updates = messages[: messages.index(answer)]
        seen = "".join(
            m["params"]["update"]["content"]["text"]
            for m in updates
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert seen
        (log,) = (self.state / "sessions").glob("*.jsonl")
        records = read_records(log)
        (message,) = [r for r in records if r["type"] == "assistant/message"]
        assert message["interrupted"] is True
        assert message["content"] == [{"type": "text", "text": seen}]
        check_log(records)


def test_an_editor_that_reads_in_bursts_gets_a_bigger_pipe_and_bigger_reads(
    tmp_path: Path,
) -> None:
    editor = RawEditor(tmp_path)
    try:
        sid = editor.start_prompt()
        # Read all there is, every couple of milliseconds: the pipe fills over
        # the least bound meanwhile and the editor empties it at once.
        while editor.pipe_size() <= STDOUT_PIPE_SIZE:
            editor.read(1 << 20)
            time.sleep(0.002)
        biggest = 0
        for _ in range(50):
            biggest = max(biggest, len(editor.read(1 << 20)))
            time.sleep(0.002)
        assert biggest > STDOUT_PIPE_SIZE, "never more than the small pipe in one read"
        editor.send({"method": "session/cancel", "params": {"sessionId": sid}})
        while not editor.answered(PROMPT_ID):
            editor.read(1 << 20)
        editor.finish()
    finally:
        editor.close()
    editor.check_stop()


def test_an_editor_that_reads_a_page_a_millisecond_keeps_the_small_pipe(tmp_path: Path) -> None:
    editor = RawEditor(tmp_path)
    try:
        sid = editor.start_prompt()
        wide = reads = 0
        while reads < 300:
            time.sleep(0.001)
            editor.read(4096)
            reads += 1
            wide += editor.pipe_size() > STDOUT_PIPE_SIZE
        # A busy machine may stall the bridge now and then (two reads come
        # between two of its looks), never for most of the play.
        assert wide < reads // 4, f"the pipe was wider than the small one at {wide} reads"
        editor.send({"method": "session/cancel", "params": {"sessionId": sid}})
        before = len(editor.received)
        while not editor.answered(PROMPT_ID):
            time.sleep(0.001)
            editor.read(4096)
        answer_at = editor.received.find(b'"id":%d' % PROMPT_ID, before)
        ahead = editor.received.rfind(b"\n", 0, answer_at) + 1 - before
        # What the pipe held and the batch the writer had taken, no more.
        assert ahead <= STDOUT_PIPE_SIZE + HIGH_WATER, f"{ahead} bytes ahead of the answer"
        editor.finish()
    finally:
        editor.close()
    editor.check_stop()
