"""The real ``acp-bridge`` subprocess driven with plain blocking pipes.

`RawBridge` writes frames (or any bytes) to the bridge's stdin and reads its
stdout in a background thread, one JSON message per line.  stderr is either
captured to a file (``stderr="file"``) or left as a pipe that nobody reads
(``stderr="unread"``), which is how an editor that ignores stderr behaves.
Every wait has a generous bound so a hang fails the test instead of freezing
it; no test asserts on elapsed time.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import orjson

Json = dict[str, Any]
WAIT = 60.0  # seconds before a wait is considered a hang


class RawBridge:
    def __init__(
        self,
        tmp: Path,
        *args: str,
        stderr: Literal["file", "unread"] = "file",
        env: dict[str, str] | None = None,
    ) -> None:
        self.state_dir = tmp / "state"
        self.stderr_path = tmp / "stderr.txt"
        self._stderr_file: IO[bytes] | None = None
        err: Any
        if stderr == "file":
            self._stderr_file = open(self.stderr_path, "wb")  # noqa: SIM115
            err = self._stderr_file
        else:
            err = subprocess.PIPE
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "acp_bridge", "--state-dir", str(self.state_dir), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env if env is not None else os.environ.copy(),
        )
        self.messages: queue.Queue[Json | None] = queue.Queue()
        self.seen: list[Json] = []
        self._next_id = 1000
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.messages.put(orjson.loads(line))
        self.messages.put(None)

    # -- writing ---------------------------------------------------------------

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Json) -> None:
        self.write(orjson.dumps(message) + b"\n")

    def request(self, method: str, params: Json) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: Json) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- reading ---------------------------------------------------------------

    def next_message(self) -> Json:
        message = self.messages.get(timeout=WAIT)
        if message is None:
            raise EOFError("the bridge closed its stdout")
        self.seen.append(message)
        return message

    def response(self, request_id: int) -> Json:
        """Read until the response to ``request_id``; earlier messages stay in ``seen``."""
        for message in self.seen:
            if message.get("id") == request_id and "method" not in message:
                return message
        while True:
            message = self.next_message()
            if message.get("id") == request_id and "method" not in message:
                return message

    def call(self, method: str, params: Json) -> Json:
        return self.response(self.request(method, params))

    def initialize(self) -> Json:
        return self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self, cwd: str = "/") -> str:
        answer = self.call("session/new", {"cwd": cwd, "mcpServers": []})
        assert "result" in answer, answer
        session_id: str = answer["result"]["sessionId"]
        return session_id

    def prompt(self, session_id: str, text: str) -> int:
        return self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    def chunks(self, session_id: str, since: int = 0) -> list[str]:
        """The text of the message chunks seen so far for a session."""
        return [
            m["params"]["update"]["content"]["text"]
            for m in self.seen[since:]
            if m.get("method") == "session/update"
            and m["params"]["sessionId"] == session_id
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ]

    def wait_for_chunks(self, session_id: str, count: int) -> None:
        while len(self.chunks(session_id)) < count:
            self.next_message()

    # -- ending ----------------------------------------------------------------

    def close(self) -> int:
        """Close stdin and wait for the exit status (the bridge ends on EOF)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            status = self.proc.wait(timeout=WAIT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self._stderr_file is not None:
                self._stderr_file.close()
        return status

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def __enter__(self) -> RawBridge:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._stderr_file is not None and not self._stderr_file.closed:
            self._stderr_file.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
