"""A minimal ACP client that drives an agent subprocess over stdio.

Used by ``acp-bridge demo`` and by the test suite.  It keeps a transcript of
every frame in both directions, in wire order, so a test can assert on
exactly what an editor would have seen.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import orjson

from .jsonrpc.framing import LineFramer


class AgentExited(Exception):
    """The agent process went away while a request was waiting."""


@dataclass
class PromptResult:
    response: dict[str, Any]
    updates: list[dict[str, Any]]
    # Updates that arrived after the response (must stay empty: invariant I1).
    late: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stop_reason(self) -> str | None:
        result = self.response.get("result")
        return result.get("stopReason") if isinstance(result, dict) else None

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"]["text"]
            for u in self.updates
            if u.get("sessionUpdate") == kind and u["content"].get("type") == "text"
        )


class AcpClient:
    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.transcript: list[tuple[str, dict[str, Any]]] = []
        self._framer = LineFramer()
        self._next_id = 0
        self._waiting: dict[int, anyio.Event] = {}
        self._responses: dict[int, dict[str, Any]] = {}
        self._on_update: Callable[[dict[str, Any]], None] | None = None
        self.updates: list[dict[str, Any]] = []
        self.eof = anyio.Event()

    # -- wire --------------------------------------------------------------

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        self.transcript.append(("send", message))
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        done = self._waiting[rid] = anyio.Event()
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        await done.wait()
        if rid not in self._responses:
            raise AgentExited(f"the agent closed its stdout before answering {method}")
        return self._responses.pop(rid)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def read_loop(self) -> None:
        assert self.process.stdout is not None
        try:
            async for data in self.process.stdout:
                for frame in self._framer.feed(data):
                    assert isinstance(frame, bytes)
                    self._receive(orjson.loads(frame))
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self.eof.set()
            for event in self._waiting.values():
                event.set()

    def _receive(self, msg: dict[str, Any]) -> None:
        self.transcript.append(("recv", msg))
        if msg.get("method") == "session/update":
            update = msg["params"]["update"]
            self.updates.append(update)
            if self._on_update is not None:
                self._on_update(update)
        elif "id" in msg and "method" not in msg:
            rid = msg["id"]
            event = self._waiting.pop(rid, None)
            self._responses[rid] = msg
            if event is not None:
                event.set()

    # -- ACP ---------------------------------------------------------------

    async def initialize(self) -> dict[str, Any]:
        return await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": {"name": "acp-bridge-client", "version": "1"},
            },
        )

    async def new_session(self, cwd: str | None = None) -> str:
        resp = await self.request("session/new", {"cwd": cwd or os.getcwd(), "mcpServers": []})
        return str(resp["result"]["sessionId"])

    async def prompt(
        self,
        session_id: str,
        text: str,
        *,
        cancel_after: int | None = None,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        settle: float = 0.05,
        cancel_when_quiet: float | None = None,
    ) -> PromptResult:
        """Send a prompt; optionally send session/cancel after N message chunks
        (or, with ``cancel_when_quiet``, as soon as no chunk has arrived for
        that many seconds, for a stream that ends its output before N).

        After the response, waits ``settle`` seconds and reports any update
        that arrived late (there must be none).
        """
        start = len(self.updates)
        chunks = 0
        cancel_now = anyio.Event()

        def seen(update: dict[str, Any]) -> None:
            nonlocal chunks
            if update.get("sessionUpdate") in ("agent_message_chunk", "agent_thought_chunk"):
                chunks += 1
                if cancel_after is not None and chunks == cancel_after:
                    cancel_now.set()
            if on_update is not None:
                on_update(update)

        self._on_update = seen
        result: dict[str, Any] = {}

        async def run_prompt() -> None:
            result.update(
                await self.request(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                )
            )
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_prompt)
            if cancel_after is not None:
                if cancel_when_quiet is None:
                    await cancel_now.wait()
                else:
                    while not cancel_now.is_set():
                        seen_before = chunks
                        with anyio.move_on_after(cancel_when_quiet):
                            await cancel_now.wait()
                        if chunks == seen_before:
                            break
                await self.notify("session/cancel", {"sessionId": session_id})
            await anyio.sleep_forever()
        end = len(self.updates)
        if settle:
            await anyio.sleep(settle)
        self._on_update = None
        return PromptResult(result, self.updates[start:end], self.updates[end:])


def bridge_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "acp_bridge", *args]


async def spawn(
    command: Sequence[str], *, env: dict[str, str] | None = None, stderr: int | None = None
) -> AcpClient:
    process = await anyio.open_process(list(command), env=env, stderr=stderr)
    return AcpClient(process)
