"""The "limit" reference: a minimal ACP agent with no framework, only orjson and syscalls.

Single thread, no event loop.  Every ``session/prompt`` streams pre-serialized
``agent_message_chunk`` frames ("tok ") in batches with blocking ``os.write`` calls, and
between two batches polls stdin (zero timeout) for new lines.  When the matching
``session/cancel`` arrives it stops after the batch in flight and writes the
``{"stopReason":"cancelled"}`` response: every chunk of the turn is written before the
response, and nothing of the turn after it.

Messages that arrive while a turn is streaming are handled between batches: cancels and
cheap requests (initialize, session/new, unknown methods) at once, another prompt is queued
and runs when the current turn ends (a cancel for a queued prompt makes it end at once).
stdin EOF ends the process.

``--one-line``: every prompt is answered with one chunk and ``end_turn`` instead (the turn
overhead benchmark).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import uuid
from collections import deque
from typing import Any

import orjson

AGENT_INFO = {"name": "ref-raw-agent", "version": "0.1.0"}
PROTOCOL_VERSION = 1
CHUNK_TEXT = "tok "
ONE_LINE_TEXT = "Done."
STDIN, STDOUT = 0, 1
READ_SIZE = 1 << 16

Message = dict[str, Any]


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(STDOUT, view) :]


def response(req_id: Any, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": req_id, "result": result}) + b"\n"


def error(req_id: Any, code: int, message: str) -> bytes:
    body = {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}
    return orjson.dumps(body) + b"\n"


def chunk_frame(session_id: str, text: str = CHUNK_TEXT) -> bytes:
    update = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
    }
    note = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }
    return orjson.dumps(note) + b"\n"


class RawAgent:
    def __init__(self, batch: int, one_line: bool = False) -> None:
        self.batch = batch
        self.one_line = one_line
        self.sessions: set[str] = set()
        self.inbox: deque[Message] = deque()  # parsed messages not handled yet
        self.queued_prompts: deque[Message] = deque()
        self.cancelled_before_start: set[str] = set()
        self.tail = b""
        self.poller = select.poll()
        self.poller.register(STDIN, select.POLLIN)
        self.eof = False

    # -- input ---------------------------------------------------------------------------
    def read_input(self, timeout_ms: int | None) -> None:
        """Read what stdin has (waiting at most ``timeout_ms``; None = forever)."""
        if self.eof or not self.poller.poll(timeout_ms):
            return
        data = os.read(STDIN, READ_SIZE)
        if not data:
            self.eof = True
            return
        lines = (self.tail + data).split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            if not line.strip():
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                write_all(error(None, -32700, "Parse error"))
                continue
            if isinstance(msg, dict):
                self.inbox.append(msg)

    # -- dispatch ------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            while self.inbox:
                self.handle(self.inbox.popleft(), streaming=None)
            if self.queued_prompts:
                self.prompt(self.queued_prompts.popleft())
                continue
            if self.eof:
                return
            self.read_input(None)

    def handle(self, msg: Message, streaming: str | None) -> bool:
        """Handle one message; return True if it cancels the turn of ``streaming``."""
        method = msg.get("method")
        params = msg.get("params") or {}
        if method == "session/cancel":
            sid = params.get("sessionId")
            if sid == streaming:
                return True
            if isinstance(sid, str) and any(
                p["params"]["sessionId"] == sid for p in self.queued_prompts
            ):
                self.cancelled_before_start.add(sid)
            return False
        if "id" not in msg or not isinstance(method, str):
            return False  # other notifications, responses: nothing to do
        req_id = msg["id"]
        if method == "initialize":
            result = {
                "protocolVersion": PROTOCOL_VERSION,
                "agentCapabilities": {},
                "authMethods": [],
                "agentInfo": AGENT_INFO,
            }
            write_all(response(req_id, result))
        elif method == "session/new":
            sid = f"sess_{uuid.uuid4().hex}"
            self.sessions.add(sid)
            write_all(response(req_id, {"sessionId": sid}))
        elif method == "session/prompt":
            sid = params.get("sessionId")
            if sid not in self.sessions:
                write_all(error(req_id, -32602, "Invalid params: unknown sessionId"))
            elif streaming is None:
                self.prompt(msg)
            else:
                self.queued_prompts.append(msg)
        else:
            write_all(error(req_id, -32601, "Method not found"))
        return False

    def prompt(self, msg: Message) -> None:
        sid = msg["params"]["sessionId"]
        if self.one_line:
            write_all(
                chunk_frame(sid, ONE_LINE_TEXT) + response(msg["id"], {"stopReason": "end_turn"})
            )
            return
        done = sid in self.cancelled_before_start
        self.cancelled_before_start.discard(sid)
        frames = chunk_frame(sid) * self.batch
        while not done:
            write_all(frames)
            self.read_input(0)
            while self.inbox and not done:
                done = self.handle(self.inbox.popleft(), streaming=sid)
            if self.eof and not done:
                return
        write_all(response(msg["id"], {"stopReason": "cancelled"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64, help="chunk frames per write")
    parser.add_argument(
        "--one-line", action="store_true", help="answer every prompt with one chunk, end_turn"
    )
    args = parser.parse_args()
    try:
        RawAgent(max(1, args.batch), args.one_line).run()
    except BrokenPipeError:
        # The client went away: exit quietly, without a traceback on a closed stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), STDOUT)
        sys.exit(0)


if __name__ == "__main__":
    main()
