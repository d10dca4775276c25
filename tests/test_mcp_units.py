"""The protocol logic of MCP support, without I/O: names, entries, results, environment."""

from __future__ import annotations

import pytest

from acp_bridge.mcp.content import kind_of, map_result, read_only_of
from acp_bridge.mcp.naming import MAX_NAME, assign_names, sanitize
from acp_bridge.mcp.specs import ServerSpec, SpecError, merge, parse_server
from acp_bridge.mcp.stdio import environment

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
