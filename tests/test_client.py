"""The test client answers the agent: its handler table, against an agent-side `Connection`.

The bridge does not call the editor yet, so the agent here is a bare
`Connection` in this process, wired to an `AcpClient` by in-memory streams:
what the connection writes is the client's stdout, what the client writes is
fed to the connection as the server feeds it stdin.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from acp_bridge.client import AcpClient, running
from acp_bridge.jsonrpc.connection import Connection, ConnectionClosed
from acp_bridge.jsonrpc.errors import RemoteError

pytestmark = pytest.mark.anyio

Json = dict[str, Any]


class AgentStdout:
    """The agent's `FrameWriter`: frames go to the client's read side."""

    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self.stream = stream

    def send(self, frame: bytes) -> None:
        self.stream.send_nowait(frame)

    def flush_now(self) -> None:
        pass


class AgentStdin:
    """The client's `ByteSink`: bytes are fed to the agent's connection."""

    def __init__(self, conn: Connection, stdout: MemoryObjectSendStream[bytes]) -> None:
        self.conn = conn
        self.stdout = stdout
        self.received = bytearray()
        self._changed = anyio.Event()

    async def send(self, data: bytes, /) -> None:
        self.received += data
        self._changed.set()
        self._changed = anyio.Event()
        self.conn.feed(data)

    async def wait_for(self, needle: bytes) -> None:
        """Until the agent has been sent ``needle``."""
        while needle not in self.received:
            await self._changed.wait()

    async def aclose(self) -> None:
        # EOF on the agent's stdin: it fails what waits for the editor and exits.
        self.conn.fail_pending("stdin closed")
        self.stdout.close()


@asynccontextmanager
async def agent_and_client() -> AsyncIterator[tuple[Connection, AcpClient]]:
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    conn = Connection(AgentStdout(send))

    async def initialize(params: Json) -> Any:
        return {"protocolVersion": 1}

    conn.requests["initialize"] = initialize
    client = AcpClient.over(AgentStdin(conn, send), receive)
    with send, receive:
        async with anyio.create_task_group() as tg:
            conn.bind(tg)
            tg.start_soon(client.read_loop)
            yield conn, client
            await client.close_stdin()
            await client.eof.wait()


async def test_a_handler_answers_the_agents_request() -> None:
    seen: list[Json] = []

    async def read_text_file(params: Json) -> Any:
        seen.append(params)
        return {"content": f"text of {params['path']}"}

    async with agent_and_client() as (conn, client):
        client.handlers["fs/read_text_file"] = read_text_file
        params = {"sessionId": "s", "path": "/w/a.txt", "line": 1, "limit": 10}
        result = await conn.request("fs/read_text_file", params)
    assert result == {"content": "text of /w/a.txt"}
    assert seen == [params]
    assert client.transcript == [
        (
            "recv",
            {"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": params},
        ),
        ("send", {"jsonrpc": "2.0", "id": 0, "result": {"content": "text of /w/a.txt"}}),
    ]


async def test_the_handler_table_covers_files_terminals_and_permissions() -> None:
    written: dict[str, str] = {}

    async def write(params: Json) -> Any:
        written[params["path"]] = params["content"]
        return {}

    async def create_terminal(params: Json) -> Any:
        return {"terminalId": f"term-{params['command']}"}

    async def permission(params: Json) -> Any:
        return {"outcome": {"outcome": "selected", "optionId": params["options"][0]["optionId"]}}

    async with agent_and_client() as (conn, client):
        client.handlers.update(
            {
                "fs/write_text_file": write,
                "terminal/create": create_terminal,
                "session/request_permission": permission,
            }
        )
        assert await conn.request("fs/write_text_file", {"path": "/w/b", "content": "x"}) == {}
        created = await conn.request("terminal/create", {"sessionId": "s", "command": "ls"})
        chosen = await conn.request(
            "session/request_permission",
            {
                "sessionId": "s",
                "toolCall": {"toolCallId": "t1"},
                "options": [{"optionId": "allow-once", "name": "Allow", "kind": "allow_once"}],
            },
        )
    assert written == {"/w/b": "x"}
    assert created == {"terminalId": "term-ls"}
    assert chosen == {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


async def test_an_unhandled_method_is_answered_method_not_found() -> None:
    async with agent_and_client() as (conn, _client):
        with pytest.raises(RemoteError) as caught:
            await conn.request("terminal/output", {"terminalId": "t"})
    assert caught.value.code == -32601
    assert caught.value.data == {"method": "terminal/output"}


async def test_a_handler_error_reaches_the_agent_as_a_typed_error() -> None:
    async def missing(params: Json) -> Any:
        raise RemoteError(-32002, "Resource not found", {"uri": "file:///w/nope"})

    async def broken(params: Json) -> Any:
        raise ValueError("bad handler")

    async with agent_and_client() as (conn, client):
        client.handlers["fs/read_text_file"] = missing
        client.handlers["fs/write_text_file"] = broken
        with pytest.raises(RemoteError) as not_found:
            await conn.request("fs/read_text_file", {"path": "/w/nope"})
        with pytest.raises(RemoteError) as internal:
            await conn.request("fs/write_text_file", {"path": "/w/x", "content": ""})
    assert (not_found.value.code, not_found.value.message, not_found.value.data) == (
        -32002,
        "Resource not found",
        {"uri": "file:///w/nope"},
    )
    assert internal.value.code == -32603
    assert internal.value.data == {"detail": "ValueError: bad handler"}


async def test_cancelling_the_agents_request_cancels_the_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="acp_bridge.jsonrpc")
    started = anyio.Event()
    handler_cancelled = anyio.Event()

    async def wait_for_exit(params: Json) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            handler_cancelled.set()

    async with agent_and_client() as (conn, client):
        client.handlers["terminal/wait_for_exit"] = wait_for_exit
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await conn.request("terminal/wait_for_exit", {"terminalId": "t"})

            tg.start_soon(call)
            await started.wait()
            tg.cancel_scope.cancel()
        await handler_cancelled.wait()
        stdin = client.process.stdin
        assert isinstance(stdin, AgentStdin)
        await stdin.wait_for(b"-32800")
    answer = {"jsonrpc": "2.0", "id": 0, "error": {"code": -32800, "message": "Request cancelled"}}
    assert ("send", answer) in client.transcript
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}
    assert ("recv", cancel) in client.transcript
    # The late -32800 is expected by the agent: no "unknown id" warning.
    assert [r.getMessage() for r in caplog.records] == []


async def test_the_agents_pending_request_fails_when_the_editor_goes_away() -> None:
    started = anyio.Event()

    async def never(params: Json) -> Any:
        started.set()
        await anyio.sleep_forever()

    failure: list[BaseException] = []
    async with agent_and_client() as (conn, client):
        client.handlers["session/request_permission"] = never
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                try:
                    await conn.request("session/request_permission", {})
                except ConnectionClosed as exc:
                    failure.append(exc)

            tg.start_soon(call)
            await started.wait()
            await client.close_stdin()
    assert len(failure) == 1
    assert "connection closed (stdin closed)" in str(failure[0])


async def test_raw_bytes_are_sent_as_they_are_and_recorded() -> None:
    async with agent_and_client() as (_conn, client):
        answer = await client.exchange(b"{not json")
    assert answer == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error", "data": answer[0]["error"]["data"]},
        }
    ]
    raw = [entry for entry in client.transcript if entry[0] == "send-raw"]
    assert raw[0][1]["bytes"].startswith("{not json\n")


# -- a spawned agent ------------------------------------------------------------------


async def test_finish_closes_stdin_and_returns_the_exit_status() -> None:
    agent = "import sys; sys.stdout.write(sys.stdin.read()); sys.exit(3)"
    async with running([sys.executable, "-c", agent]) as client:
        await client.send({"jsonrpc": "2.0", "method": "echo", "params": {}})
        assert await client.finish() == 3
        assert client.agent.returncode == 3
    assert client.messages == [{"jsonrpc": "2.0", "method": "echo", "params": {}}]


async def test_a_write_the_agent_never_takes_fails_instead_of_hanging() -> None:
    agent = "import time; time.sleep(600)"  # never reads its stdin
    async with running([sys.executable, "-c", agent]) as client:
        client.write_within = 0.5
        with pytest.raises(TimeoutError):
            await client.send_raw(b"x" * (4 << 20))
        assert 0 < client.agent.stdin.written < 4 << 20


async def test_only_a_spawned_agent_has_a_process_handle() -> None:
    async with agent_and_client() as (_conn, client):
        with pytest.raises(TypeError):
            _ = client.agent
