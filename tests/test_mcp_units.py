"""The protocol logic of MCP support, without I/O: names, entries, results, environment."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import anyio
import orjson
import pytest

from acp_bridge.jsonrpc.messages import parse_frame
from acp_bridge.mcp import stdio
from acp_bridge.mcp.content import kind_of, map_result, read_only_of
from acp_bridge.mcp.handshake import HANDSHAKE_VERSIONS, LATEST_VERSION, Handshake, HandshakeFailed
from acp_bridge.mcp.naming import MAX_NAME, assign_names, sanitize
from acp_bridge.mcp.specs import ServerSpec, SpecError, merge, parse_server
from acp_bridge.mcp.stdio import QUEUE_LIMIT, Pipes, answered_id, environment

# -- names ----------------------------------------------------------------------------


def test_names_are_prefixed_and_sanitized() -> None:
    names = assign_names([("git hub", "list.issues"), ("db", "query")])
    assert names == {
        ("db", "query"): "mcp__db__query",
        ("git hub", "list.issues"): "mcp__git_hub__list_issues",
    }
    assert sanitize("ä/b") == "__b"
    assert sanitize("") == "_"


def test_collisions_are_resolved_deterministically_whatever_the_order() -> None:
    pairs = [("a.b", "t"), ("a_b", "t"), ("a", "b__t"), ("a__b", "t")]
    first = assign_names(pairs)
    assert assign_names(reversed(pairs)) == first
    assert len(set(first.values())) == len(pairs)
    # The first pair in sorted order keeps the plain name.
    assert first[("a", "b__t")] == "mcp__a__b__t"
    for name in first.values():
        assert len(name) <= MAX_NAME


def test_long_names_are_cut_with_a_hash() -> None:
    server, tool = "s" * 40, "t" * 40
    (name,) = assign_names([(server, tool)]).values()
    assert len(name) == MAX_NAME
    assert name.startswith("mcp__" + "s" * 40)
    (other,) = assign_names([(server, tool + "x")]).values()
    assert other != name


# -- entries --------------------------------------------------------------------------


def test_entries_of_each_transport() -> None:
    stdio = parse_server(
        {"name": "a", "command": "srv", "args": ["-v"], "env": [{"name": "K", "value": "v"}]},
        "mcpServers[0]",
    )
    assert stdio == ServerSpec("a", "stdio", command="srv", args=("-v",), env=(("K", "v"),))
    http = parse_server(
        {"type": "http", "name": "h", "url": "https://x/mcp", "headers": []}, "mcpServers[1]"
    )
    assert (http.transport, http.url) == ("http", "https://x/mcp")
    sse = parse_server({"type": "sse", "name": "s", "url": "http://x/sse"}, "m")
    assert sse.transport == "sse"
    table = parse_server({"name": "c", "command": "x", "env": {"K": "v"}}, "c", origin="config")
    assert table.env == (("K", "v"),)


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (5, "mcpServers[0]"),
        ({"command": "x"}, "mcpServers[0].name"),
        ({"name": "a"}, "mcpServers[0].command"),
        ({"name": "a", "command": "x", "args": "-v"}, "mcpServers[0].args"),
        ({"name": "a", "command": "x", "env": [{"name": "K"}]}, "mcpServers[0].env[0].value"),
        ({"name": "a", "command": "x", "env": {"K": "v"}}, "mcpServers[0].env"),
        ({"type": "ws", "name": "a"}, "mcpServers[0].type"),
        ({"type": "http", "name": "a", "url": "ftp://x"}, "mcpServers[0].url"),
    ],
)
def test_bad_entries_name_their_field(entry: object, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_server(entry, "mcpServers[0]")
    assert caught.value.field == field


def test_the_editor_wins_a_name_clash() -> None:
    editor = [ServerSpec("a", "stdio", command="from-editor")]
    configured = [
        ServerSpec("a", "stdio", command="from-config", origin="config"),
        ServerSpec("b", "stdio", command="b", origin="config"),
    ]
    servers, notes = merge(editor, configured)
    assert [(s.name, s.command) for s in servers] == [("a", "from-editor"), ("b", "b")]
    assert len(notes) == 1
    assert "'a' of the config file is left out" in notes[0]


# -- results ----------------------------------------------------------------------------


def test_kinds_from_annotations() -> None:
    assert kind_of({"readOnlyHint": True}) == "read"
    assert read_only_of({"readOnlyHint": True})
    assert kind_of({"destructiveHint": True}) == "execute"
    assert kind_of({"destructiveHint": False}) == "other"
    assert kind_of(None) == "other"
    assert not read_only_of(None)


def test_a_result_with_every_kind_of_content() -> None:
    result = {
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "A"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
        ],
        "structuredContent": {"n": 1},
        "isError": False,
    }
    mapped = map_result(result, 1000)
    assert mapped.text == (
        "hello\n[image: image/png, 3 bytes]\n[resource file:///a.txt]\nA\n"
        "[resource file:///b.bin: binary, 3 bytes]\n[resource link: c <file:///c>]"
    )
    assert [c["content"]["type"] for c in mapped.content] == [
        "image",
        "resource",
        "resource",
        "resource_link",
    ]
    assert mapped.raw_output == {"isError": False, "structuredContent": {"n": 1}}
    assert not mapped.is_error


def test_errors_empty_results_and_bounds() -> None:
    error = map_result({"content": [], "isError": True}, 100)
    assert error.is_error
    assert "error" in error.text
    assert map_result({"content": []}, 100).text == "(no output)"
    assert map_result({"content": [], "structuredContent": {"a": 1}}, 100).text == '{"a":1}'
    long = map_result({"content": [{"type": "text", "text": "x" * 500}]}, 100)
    assert long.text.startswith("x" * 100)
    assert "truncated" in long.text
    huge = map_result({"content": [], "structuredContent": {"a": "y" * 50_000}}, 100)
    assert huge.raw_output is not None
    assert "structuredContent" not in huge.raw_output


# -- environment ------------------------------------------------------------------------


def test_a_stdio_server_gets_the_editors_env_and_nothing_secret_of_the_bridges() -> None:
    bridge = {"PATH": "/bin", "HOME": "/h", "ANTHROPIC_API_KEY": "sk", "OPENAI_API_KEY": "o"}
    spec = ServerSpec("a", "stdio", command="x", env=(("TOKEN", "given"), ("PATH", "/mine")))
    assert environment(spec, bridge) == {"PATH": "/mine", "HOME": "/h", "TOKEN": "given"}


# -- the bridge's own handshake (stdio) ---------------------------------------------------


class FakeServer:
    """Answers the handshake's frames at once, as a server would; records them."""

    def __init__(self, pages: list[dict[str, Any]], version: str = LATEST_VERSION) -> None:
        self.pages = pages
        self.version = version
        self.frames: list[dict[str, Any]] = []
        self.shake = Handshake(self.receive, self.changed)
        self.changes = 0

    def changed(self) -> None:
        self.changes += 1

    def say(self, message: dict[str, Any]) -> None:
        self.shake.received(parse_frame(orjson.dumps({"jsonrpc": "2.0", **message})))

    def receive(self, frame: bytes) -> None:
        assert frame.endswith(b"\n")
        message = orjson.loads(frame)
        self.frames.append(message)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            info = {"name": "fake", "version": "1"}
            result = {"protocolVersion": self.version, "capabilities": {}, "serverInfo": info}
            self.say({"id": rid, "result": result})
        elif method == "tools/list":
            cursor = (message.get("params") or {}).get("cursor")
            if cursor is None:
                # Before its first page: a ping, a request the bridge does not
                # serve, a change of its tools, and an answer nobody asked for.
                self.say({"id": "s-1", "method": "ping"})
                self.say({"id": 7, "method": "roots/list", "params": {}})
                self.say({"method": "notifications/tools/list_changed"})
                self.say({"id": 99, "result": {}})
            page = self.pages[0 if cursor is None else int(cursor)]
            self.say({"id": rid, "result": page})


@pytest.mark.anyio
async def test_the_handshake_starts_a_connection_as_the_mcp_client_would() -> None:
    pages: list[dict[str, Any]] = [
        {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "1"},
        {"tools": [{"name": "b", "inputSchema": {}, "annotations": None}]},
    ]
    server = FakeServer(pages)
    result = await server.shake.initialize({"name": "acp-bridge", "version": "9"})
    assert result["serverInfo"] == {"name": "fake", "version": "1"}
    tools = await server.shake.list_tools()
    assert tools == [
        {"name": "a", "inputSchema": {"type": "object"}},
        {"name": "b", "inputSchema": {}},
    ]
    sent = server.frames
    assert sent[0] == {
        "jsonrpc": "2.0",
        "id": "acp-bridge-1",
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "acp-bridge", "version": "9"},
        },
    }
    assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert sent[2] == {"jsonrpc": "2.0", "id": "acp-bridge-2", "method": "tools/list"}
    assert sent[3] == {"jsonrpc": "2.0", "id": "s-1", "result": {}}
    assert sent[4]["id"] == 7
    assert sent[4]["error"]["code"] == -32601
    assert sent[5]["params"] == {"cursor": "1"}
    assert [m.get("method") for m in sent[6:]] == []
    assert server.changes == 1


@pytest.mark.parametrize(
    ("version", "pages", "why"),
    [
        ("1999-01-01", [], "Unsupported protocol version from the server: 1999-01-01"),
        (LATEST_VERSION, [{"tools": [{"inputSchema": {}}]}], "tool 0 of its tools/list"),
        (LATEST_VERSION, [{"tool": []}], "has no tools array"),
    ],
)
@pytest.mark.anyio
async def test_a_handshake_that_cannot_start_says_why(
    version: str, pages: list[dict[str, Any]], why: str
) -> None:
    server = FakeServer(pages, version)

    async def start() -> None:
        await server.shake.initialize({"name": "acp-bridge", "version": "9"})
        await server.shake.list_tools()

    with pytest.raises(HandshakeFailed, match=why):
        await start()


@pytest.mark.anyio
async def test_an_error_answer_fails_the_handshake() -> None:
    shake: Handshake

    def refuse(frame: bytes) -> None:
        rid = orjson.loads(frame)["id"]
        error = {"code": -32600, "message": "no thanks"}
        shake.received(parse_frame(orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": error})))

    shake = Handshake(refuse, lambda: None)
    with pytest.raises(HandshakeFailed, match="refused initialize: no thanks"):
        await shake.initialize({"name": "acp-bridge", "version": "9"})


def test_the_handshake_versions_are_the_mcp_packages() -> None:
    from mcp_types import version

    assert HANDSHAKE_VERSIONS == version.HANDSHAKE_PROTOCOL_VERSIONS
    assert LATEST_VERSION == version.LATEST_HANDSHAKE_VERSION


# -- the stdio pipes ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_message_over_the_limit_ends_the_connection(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's lines before it are delivered; the connection ends as soon as
    the unfinished line goes over the limit (not at its newline, which may never come)."""
    monkeypatch.setattr(stdio, "MAX_MESSAGE", 100)
    code = (
        'import sys, time; sys.stdout.write(\'{"jsonrpc":"2.0","method":"a"}\\n\''
        " + 'x' * 150); sys.stdout.flush(); time.sleep(30)"
    )
    process = await anyio.open_process([sys.executable, "-c", code], start_new_session=True)
    got: list[Any] = []
    gone = anyio.Event()
    with anyio.fail_after(20):
        async with stdio.connect(process, "big", got.append, gone.set):
            await gone.wait()
    assert [message.method for message in got] == ["a"]
    assert "MCP server big: a message over 100 bytes" in caplog.text


def test_the_id_of_an_answer_line() -> None:
    assert answered_id(b'{"jsonrpc":"2.0","id":7,"result":"x"}') == 7
    assert answered_id(b'{"id":"a","error":3}') == "a"
    assert answered_id(b'{"id":7,"method":"ping"}') is None  # a request
    assert answered_id(b'{"id":true,"result":{}}') is None
    assert answered_id(b"[1]") is None
    assert answered_id(b"not json") is None


def test_what_waits_for_a_server_is_bounded() -> None:
    broken: list[bool] = []
    pipes = Pipes(lambda message: None, lambda: broken.append(True))
    frame = b"x" * (1024 * 1024)
    for _ in range(QUEUE_LIMIT // len(frame)):
        pipes.send(frame)
    assert pipes.queued == QUEUE_LIMIT
    assert not broken
    assert pipes.broken is None
    pipes.send(b"{}\n")
    assert broken == [True]
    assert pipes.broken is not None
    assert "does not read" in pipes.broken
    pipes.send(b"{}\n")  # nothing more is queued, nor told again
    assert pipes.queued == QUEUE_LIMIT
    assert broken == [True]
    pipes.close()


def test_an_invalid_answer_in_the_handshake_answers_its_request() -> None:
    got: list[Any] = []
    pipes = Pipes(got.append)
    import anyio

    anyio.run(pipes.deliver, b'{"jsonrpc":"1.0","id":"acp-bridge-1","result":{}}', "s")
    anyio.run(pipes.deliver, b'{"jsonrpc":"1.0","result":{}}', "s")  # no id: dropped
    (response,) = got
    assert response.id == "acp-bridge-1"
    assert "not valid JSON-RPC" in response.error["message"]
    pipes.close()


def test_the_family_of_a_server_is_found_by_its_mark_and_its_parent_links() -> None:
    """A child that left the group and outlived its parent is found by the mark
    in its environment; one that cleared its environment, through its parent
    while that stands; an unrelated process is not found."""
    import signal
    import subprocess
    import sys

    from acp_bridge.mcp import family

    mark = family.new_mark()
    env = {"PATH": os.environ.get("PATH", ""), family.MARK: mark}
    code = (
        "import subprocess, sys;"
        "a = subprocess.Popen(['sleep', '600'], start_new_session=True);"
        "b = subprocess.Popen(['sleep', '600'], start_new_session=True, env={});"
        "print(a.pid, b.pid, flush=True); sys.stdin.read()"
    )
    pids: list[int] = []
    with (
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        ) as leader,
        subprocess.Popen(["sleep", "600"], start_new_session=True) as stranger,
    ):
        try:
            assert leader.stdout is not None
            assert leader.stdin is not None
            pids.extend(map(int, leader.stdout.readline().split()))
            marked, cleared = pids
            found = {pid for pid, _ in family.find(leader.pid, mark)}
            assert {leader.pid, marked, cleared} <= found
            assert stranger.pid not in found
            leader.stdin.close()
            leader.wait(30)
            # The parent is gone: the marked child is still found, the cleared one is not.
            members = family.find(leader.pid, mark)
            assert {pid for pid, _ in members} == {marked}
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            stranger.kill()
            leader.kill()
