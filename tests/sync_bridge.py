"""A small blocking driver of the real bridge subprocess, for fault tests.

The tests that change the process's surroundings (umask, signals, a deleted
state folder, an editor that never reads) are easiest to write as plain
sequential code; this runs `acp-bridge` with `subprocess.Popen`, reads its
stdout in a thread and hands each frame to the test.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson

from acp_bridge.client import bridge_command

TIMEOUT = 60


class Bridge:
    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        umask: int = -1,
        stderr: Path | None = None,
        read_stdout: bool = True,
    ) -> None:
        self._stderr = open(stderr, "wb") if stderr is not None else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            bridge_command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr if self._stderr is not None else subprocess.DEVNULL,
            env=env,
            umask=umask,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.received: list[dict[str, Any]] = []
        self._next_id = 0
        self._reader: threading.Thread | None = None
        self._reading = threading.Event()
        self._reading.set()
        if read_stdout:
            self.start_reading()

    def start_reading(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def pause_reading(self) -> None:
        """Stop reading stdout (the next read, if one is under way, still completes)."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        fd = self.proc.stdout.fileno()
        while True:
            self._reading.wait()
            data = os.read(fd, 1 << 16)
            if not data:
                self.frames.put(None)
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                self.frames.put(orjson.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        self.proc.stdin.flush()

    def request_nowait(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def wait_for(self, request_id: int) -> dict[str, Any]:
        """Read frames until the response to ``request_id``; keep them all in ``received``."""
        while True:
            frame = self.frames.get(timeout=TIMEOUT)
            if frame is None:
                raise EOFError(f"the bridge closed stdout before answering {request_id}")
            self.received.append(frame)
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.wait_for(self.request_nowait(method, params))

    def start_session(self, cwd: str) -> str:
        self.request("initialize", {"protocolVersion": 1})
        answer = self.request("session/new", {"cwd": cwd, "mcpServers": []})
        session_id: str = answer["result"]["sessionId"]
        return session_id

    def prompt_nowait(self, session_id: str, text: str) -> int:
        return self.request_nowait(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        return self.wait_for(self.prompt_nowait(session_id, text))

    def wait_for_update(self) -> dict[str, Any]:
        while True:
            frame = self.frames.get(timeout=TIMEOUT)
            if frame is None:
                raise EOFError("the bridge closed stdout")
            self.received.append(frame)
            if frame.get("method") == "session/update":
                return frame

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def finish(self) -> int:
        """Close stdin, read what is left, wait for exit; return the status."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        return self.wait()

    def wait(self) -> int:
        try:
            code = self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self._reader is not None:
                self._reader.join(TIMEOUT)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                with contextlib.suppress(BrokenPipeError):
                    self.proc.stdin.close()
            if self._stderr is not None:
                self._stderr.close()
        while True:  # what arrived after the last awaited answer
            try:
                frame = self.frames.get_nowait()
            except queue.Empty:
                break
            if frame is not None:
                self.received.append(frame)
        return code
