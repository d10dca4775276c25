"""The official Python SDK (``agent-client-protocol``) as an outside client.

These tests spawn the real bridge with `acp.spawn_agent_process` and drive it
the way a third-party editor built on the SDK would.  A stream observer on
the SDK connection keeps every raw incoming frame in wire order, so the tests
can check what was on the wire, not only what the SDK's models kept.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, cast

import acp
import anyio
import pytest
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.interfaces import Client
from acp.schema import ClientCapabilities, Implementation, PromptResponse

from acp_bridge import __version__
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records, session_path
from acp_bridge.providers.notes import INTERRUPTED_NOTE

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
ENDLESS = ROOT / "examples" / "endless.json"
ROUNDS = 200


class RecordingClient:
    """A duck-typed SDK client that only records the session updates it gets."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.chunk_seen = anyio.Event()
        self.chunks = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.chunks += 1
            self.chunk_seen.set()

    async def wait_for_chunks(self, count: int) -> None:
        while self.chunks < count:
            self.chunk_seen = anyio.Event()
            await self.chunk_seen.wait()


class Wire:
    """Raw frames seen by the SDK connection; incoming ones in wire order."""

    def __init__(self) -> None:
        self.incoming: list[dict[str, Any]] = []
        self.outgoing: list[dict[str, Any]] = []

    def __call__(self, event: StreamEvent) -> None:
        if event.direction is StreamDirection.INCOMING:
            self.incoming.append(event.message)
        else:
            self.outgoing.append(event.message)

    def response_index(self, request_id: object, start: int = 0) -> int:
        for i in range(start, len(self.incoming)):
            msg = self.incoming[i]
            if "method" not in msg and msg.get("id") == request_id:
                return i
        raise AssertionError(f"no response to request {request_id!r} on the wire")

    def last_request_id(self, method: str) -> object:
        for msg in reversed(self.outgoing):
            if msg.get("method") == method and "id" in msg:
                return msg["id"]
        raise AssertionError(f"no {method} request was sent")


def as_client(client: RecordingClient) -> Client:
    # Duck-typed on purpose: subclassing the SDK's Client protocol would
    # inherit stubs that silently answer methods this client does not have.
    return cast(Client, client)


def is_update(msg: dict[str, Any]) -> bool:
    return msg.get("method") == "session/update"


def chunk_text(frames: list[dict[str, Any]]) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if is_update(f) and f["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    )


def sdk_chunk_text(updates: list[Any]) -> str:
    return "".join(
        u.content.text
        for u in updates
        if getattr(u, "session_update", None) == "agent_message_chunk"
    )


def bridge_args(state_dir: Path, *extra: str) -> tuple[str, ...]:
    return (
        "-m",
        "acp_bridge",
        "--provider",
        "fake",
        "--script",
        str(ENDLESS),
        "--state-dir",
        str(state_dir),
        *extra,
    )


@asynccontextmanager
async def stderr_file(tmp_path: Path) -> AsyncIterator[IO[bytes]]:
    """The bridge's stderr goes to a file: an unread pipe could block it."""
    with (tmp_path / "stderr.txt").open("wb") as f:
        yield f


async def prompt_then_cancel(
    conn: ClientSideConnection, client: RecordingClient, sid: str, text: str, chunks: int
) -> PromptResponse:
    """Send a prompt, wait for ``chunks`` message chunks, cancel, return the answer."""
    answers: list[PromptResponse] = []

    async def run_prompt() -> None:
        answers.append(await conn.prompt(session_id=sid, prompt=[acp.text_block(text)]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_prompt)
        await client.wait_for_chunks(chunks)
        await conn.cancel(session_id=sid)
    return answers[0]


async def close_and_wait(proc: asyncio.subprocess.Process) -> int:
    """Close the agent's stdin like an editor that quits, and wait for it to exit."""
    assert proc.stdin is not None
    proc.stdin.close()
    with anyio.fail_after(20):
        return await proc.wait()


@pytest.mark.slow
async def test_two_hundred_stops_in_one_process(tmp_path: Path) -> None:
    """Prompt, stop after K chunks, 200 times: every stop keeps exactly what was shown."""
    state = tmp_path / "state"
    client = RecordingClient()
    wire = Wire()
    # Per round, in order: the delivered text, and the span of incoming
    # frames [first, response) with the message id the round streamed.
    rounds: list[tuple[str, range, str]] = []
    async with (
        stderr_file(tmp_path) as stderr,
        acp.spawn_agent_process(
            as_client(client),
            sys.executable,
            # A window no 200 rounds fill: this test counts every round in the history.
            *bridge_args(state, "--context-window", "10000000"),
            env=dict(os.environ),
            transport_kwargs={"stderr": stderr},
            observers=[wire],
        ) as (conn, proc),
    ):
        with anyio.fail_after(20):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id
        for i in range(ROUNDS):
            want = 1 + (i * 7) % 25  # K runs over 1..25
            mark = len(wire.incoming)
            first_update = len(client.updates)
            client.chunks = 0
            with anyio.fail_after(20):
                answer = await prompt_then_cancel(conn, client, sid, f"round {i}", want)
            assert answer.stop_reason == "cancelled", f"round {i}: {answer}"
            end = wire.response_index(wire.last_request_id("session/prompt"), mark)
            frames = wire.incoming[mark:end]
            assert all(is_update(f) for f in frames), f"round {i}: stray frames {frames}"
            # Round 0 also announces the session's commands and title.
            frames = [f for f in frames if "messageId" in f["params"]["update"]]
            ids = {f["params"]["update"].get("messageId") for f in frames}
            assert len(ids) == 1, f"round {i}: one message per round, got ids {ids}"
            text = chunk_text(frames)
            assert len(frames) >= want
            # The SDK saw the same text the wire carried, and all of it before the answer.
            assert sdk_chunk_text(client.updates[first_update:]) == text, f"round {i}"
            rounds.append((text, range(mark, end), ids.pop()))
        # A barrier: the bridge answers in order, so a late update would be read first.
        await conn.list_sessions()
        last_end = wire.response_index(wire.last_request_id("session/prompt"))
        late = [f for f in wire.incoming[last_end + 1 :] if is_update(f)]
        assert late == [], f"{len(late)} updates after the last prompt response"
        assert await close_and_wait(proc) == 0

    # Every update arrived inside its own round, before that round's answer:
    # nothing leaked after a prompt response, not even into the next round.
    owner = {mid: span for _, span, mid in rounds}
    assert len(owner) == ROUNDS
    for index, f in enumerate(wire.incoming):
        if is_update(f) and "messageId" in f["params"]["update"]:
            mid = f["params"]["update"]["messageId"]
            assert index in owner[mid], f"update {index} of message {mid} outside its round"

    records = read_records(session_path(str(state), sid))
    check_log(records)
    ends = [r for r in records if r["type"] == "turn/end"]
    assert [(r["reason"], r["forced"]) for r in ends] == [("cancelled", False)] * ROUNDS

    result = await anyio.run_process(
        [sys.executable, "-m", "acp_bridge", "history", "--state-dir", str(state), sid],
        env=dict(os.environ),
    )
    history = json.loads(result.stdout)
    assert len(history) == 2 * ROUNDS
    for i, (text, _span, _mid) in enumerate(rounds):
        user, assistant = history[2 * i], history[2 * i + 1]
        # `history` prints what the model receives: after a Stop, the note first.
        note = [{"type": "text", "text": INTERRUPTED_NOTE}] if i else []
        assert user == {
            "role": "user",
            "content": [*note, {"type": "text", "text": f"round {i}"}],
            "interrupted": False,
        }, f"round {i}"
        assert assistant["role"] == "assistant", f"round {i}"
        assert assistant["interrupted"] is True, f"round {i}"
        assert assistant["content"] == [{"type": "text", "text": text}], (
            f"round {i}: history holds {assistant['content']!r}, the editor was shown {text!r}"
        )


async def test_initialize_response_validates_in_the_sdk(tmp_path: Path) -> None:
    client = RecordingClient()
    wire = Wire()
    async with (
        stderr_file(tmp_path) as stderr,
        acp.spawn_agent_process(
            as_client(client),
            sys.executable,
            *bridge_args(tmp_path / "state"),
            env=dict(os.environ),
            transport_kwargs={"stderr": stderr},
            observers=[wire],
        ) as (conn, proc),
    ):
        with anyio.fail_after(20):
            # The SDK parses the answer into its pydantic model: a malformed
            # response would raise here.
            init = await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="sdk-test", version="0"),
            )
        assert init.protocol_version == 1
        assert init.agent_info is not None
        assert init.agent_info.name == "acp-bridge"
        assert init.agent_info.version == __version__
        assert init.agent_capabilities is not None
        assert init.agent_capabilities.load_session is True
        # The API-key method, parsed by the SDK (no terminal method: not asked for).
        assert [method.id for method in init.auth_methods or []] == ["api-key"]
        raw = wire.incoming[wire.response_index(wire.last_request_id("initialize"))]
        assert "error" not in raw
        assert raw["result"]["protocolVersion"] == 1
        assert raw["result"]["agentInfo"]["name"] == "acp-bridge"
        assert await close_and_wait(proc) == 0
