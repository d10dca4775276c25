"""Bad input through the real subprocess: every bad frame gets the right answer,
the process stays up, stdout carries only JSON-RPC, and a session made before
the bad frames still completes a prompt afterwards.

Each bad frame is followed by a "ping" (an ``initialize`` request with a fresh
id).  The bridge handles frames in order and queues inline answers (parse
errors, unknown methods, rejected notifications) before it starts the next
request, so whatever arrives between a bad frame and its ping's answer is
exactly what the bridge said about that frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest
from support.bridge import start_bridge
from support.harness import EXAMPLES

from acp_bridge.jsonrpc.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

HELLO = EXAMPLES / "hello.json"
Json = dict[str, Any]


def script_texts(path: Path) -> tuple[str, str]:
    """The answer text and the reasoning text of a one-response script."""
    events = json.loads(path.read_text())["responses"][0]["events"]
    text = "".join(e["text"] for e in events if "text" in e)
    reasoning = "".join(e["reasoning"] for e in events if "reasoning" in e)
    return text, reasoning


def is_response(msg: Json, rid: object) -> bool:
    return "method" not in msg and "id" in msg and msg["id"] == rid and type(msg["id"]) is type(rid)


def chunk_text(updates: list[Json], kind: str) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates
        if u.get("sessionUpdate") == kind and u["content"].get("type") == "text"
    )


def session_updates(messages: list[Json], session_id: str) -> list[Json]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


# -- the corpus ----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    frame: bytes
    # None: no answer at all.  Else the answer's id, code and (for -32602) data.field.
    id: object = None
    code: int | None = None
    field: str | None = None


def no_reply(name: str, frame: bytes) -> Case:
    return Case(name, frame)


def msg(obj: object) -> bytes:
    return orjson.dumps(obj)


def req(rid: object, method: str, params: object = None, **extra: object) -> bytes:
    body: Json = {"jsonrpc": "2.0", "id": rid, "method": method, **extra}
    if params is not None:
        body["params"] = params
    return msg(body)


def field_cases(session_id: str, cwd: str) -> Iterator[Case]:
    """Wrong params for each field of initialize, session/new and session/prompt."""
    ids = count(1000)

    def bad(method: str, params: Json, field: str) -> Case:
        rid = next(ids)
        return Case(
            f"{method} {field} {params}", req(rid, method, params), rid, INVALID_PARAMS, field
        )

    for version in (None, True, 1.5, {"v": 1}, [1], "1", -1, 65536):
        params: Json = {} if version is None else {"protocolVersion": version}
        yield bad("initialize", params, "protocolVersion")
    yield bad(
        "initialize", {"protocolVersion": 1, "clientCapabilities": "all"}, "clientCapabilities"
    )
    yield bad("initialize", {"protocolVersion": 1, "clientCapabilities": [1]}, "clientCapabilities")
    yield bad("initialize", {"protocolVersion": 1, "clientInfo": 5}, "clientInfo")

    for cwd_value in (None, 5, True, ["/"], "relative/path", "", "./here"):
        params = {"mcpServers": []}
        if cwd_value is not None:
            params["cwd"] = cwd_value
        yield bad("session/new", params, "cwd")
    yield bad("session/new", {"cwd": cwd, "mcpServers": "none"}, "mcpServers")
    yield bad("session/new", {"cwd": cwd, "mcpServers": {"a": 1}}, "mcpServers")
    yield bad("session/new", {"cwd": cwd, "mcpServers": [5]}, "mcpServers[0]")
    yield bad("session/new", {"cwd": cwd, "mcpServers": [{}]}, "mcpServers[0].name")
    yield bad("session/new", {"cwd": cwd, "mcpServers": [{"name": 7}]}, "mcpServers[0].name")

    text = {"type": "text", "text": "hi"}
    for sid in (None, 5, ["s"], {"id": "s"}, "sess_unknown", ""):
        params = {"prompt": [text]}
        if sid is not None:
            params["sessionId"] = sid
        yield bad("session/prompt", params, "sessionId")

    def prompt(blocks: object, field: str) -> Case:
        params: Json = {"sessionId": session_id}
        if blocks is not None:
            params["prompt"] = blocks
        return bad("session/prompt", params, field)

    yield prompt(None, "prompt")
    yield prompt("hello", "prompt")
    yield prompt({"type": "text", "text": "hi"}, "prompt")
    yield prompt([], "prompt")
    yield prompt([5], "prompt[0]")
    yield prompt([text, "x"], "prompt[1]")
    yield prompt([{"text": "hi"}], "prompt[0].type")
    yield prompt([{"type": 5, "text": "hi"}], "prompt[0].type")
    yield prompt([{"type": "text", "text": 5}], "prompt[0].text")
    yield prompt([{"type": "text"}], "prompt[0].text")
    yield prompt([text, {"type": "text", "text": ["a"]}], "prompt[1].text")
    yield prompt([{"type": "video", "uri": "x"}], "prompt[0].type")
    # Images are advertised (promptCapabilities.image): a malformed one names its field.
    yield prompt([{"type": "image", "data": "AA=="}], "prompt[0].mimeType")
    # Not advertised in promptCapabilities.
    yield prompt([{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}], "prompt[0].type")
    link = {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}
    yield prompt([{**link, "uri": None}], "prompt[0].uri")
    yield prompt([{**link, "uri": 3}], "prompt[0].uri")
    yield prompt([{"type": "resource_link", "uri": "file:///a"}], "prompt[0].name")
    yield prompt([{**link, "size": "big"}], "prompt[0].size")
    yield prompt([{**link, "size": True}], "prompt[0].size")
    yield prompt([{**link, "mimeType": 1}], "prompt[0].mimeType")
    yield prompt([{"type": "resource", "resource": "x"}], "prompt[0].resource")
    yield prompt([{"type": "resource"}], "prompt[0].resource")
    yield prompt(
        [{"type": "resource", "resource": {"uri": 5, "text": "t"}}], "prompt[0].resource.uri"
    )
    yield prompt(
        [{"type": "resource", "resource": {"uri": "file:///a"}}], "prompt[0].resource.text"
    )
    yield prompt(
        [{"type": "resource", "resource": {"uri": "file:///a", "text": 1}}],
        "prompt[0].resource.text",
    )
    yield prompt(
        [{"type": "resource", "resource": {"uri": "file:///a", "blob": 1}}],
        "prompt[0].resource.blob",
    )
    # What the schema types but the history does not carry is checked too.
    png = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    yield prompt([{**png, "data": "not base64!"}], "prompt[0].data")
    yield prompt([{**png, "data": "iVBORw0KGgo"}], "prompt[0].data")  # padding cut off
    yield prompt([{**png, "data": ""}], "prompt[0].data")
    yield prompt([text, {**png, "mimeType": "text/html"}], "prompt[1].mimeType")
    yield prompt([{**png, "mimeType": "image/"}], "prompt[0].mimeType")
    # An image type no provider takes.
    for mime in ("image/svg+xml", "image/tiff", "image/x-icon", "image/bmp"):
        yield prompt([{**png, "mimeType": mime}], "prompt[0].mimeType")
    yield prompt([{**png, "uri": 5}], "prompt[0].uri")
    yield prompt(
        [{"type": "resource", "resource": {"uri": "file:///a", "blob": "%%%"}}],
        "prompt[0].resource.blob",
    )
    yield prompt(
        [{"type": "resource", "resource": {"uri": "file:///a", "text": "t", "_meta": 5}}],
        "prompt[0].resource._meta",
    )
    yield prompt([{**text, "annotations": 5}], "prompt[0].annotations")
    yield prompt([{**text, "_meta": 5}], "prompt[0]._meta")
    yield prompt([{**link, "_meta": "x"}], "prompt[0]._meta")
    yield prompt([{**png, "annotations": [1]}], "prompt[0].annotations")
    yield prompt([{**text, "annotations": {"priority": "high"}}], "prompt[0].annotations.priority")
    yield prompt(
        [{**text, "annotations": {"audience": ["user", "robot"]}}],
        "prompt[0].annotations.audience[1]",
    )
    yield prompt([{**text, "annotations": {"audience": "user"}}], "prompt[0].annotations.audience")
    yield prompt(
        [{**text, "annotations": {"lastModified": 1}}], "prompt[0].annotations.lastModified"
    )
    yield prompt([{**text, "annotations": {"_meta": 1}}], "prompt[0].annotations._meta")


def protocol_cases() -> list[Case]:
    init = {"protocolVersion": 1}
    return [
        Case(
            "truncated JSON",
            b'{"jsonrpc": "2.0", "id": 50, "method": "initialize"',
            None,
            PARSE_ERROR,
        ),
        Case("not JSON", b"hello there", None, PARSE_ERROR),
        Case("single quotes", b"{'jsonrpc': '2.0', 'id': 51}", None, PARSE_ERROR),
        Case(
            "trailing comma",
            b'{"jsonrpc": "2.0", "id": 52, "method": "initialize",}',
            None,
            PARSE_ERROR,
        ),
        Case(
            "NaN",
            req(53, "initialize", {"protocolVersion": 1}).replace(b"1}", b"NaN}"),
            None,
            PARSE_ERROR,
        ),
        Case(
            "invalid UTF-8 in a request",
            b'{"jsonrpc": "2.0", "id": 54, "method": "initialize", "params": {"x": "\xff\xfe"}}',
            None,
            PARSE_ERROR,
        ),
        Case("invalid UTF-8 alone", b"\xc3\x28\xa0\xa1", None, PARSE_ERROR),
        Case(
            "a lone surrogate escape",
            req(55, "initialize", {"protocolVersion": 1}).replace(b"initialize", b"init\\ud800"),
            None,
            PARSE_ERROR,
        ),
        Case(
            "a batch",
            msg([{"jsonrpc": "2.0", "id": 56, "method": "initialize", "params": init}]),
            None,
            INVALID_REQUEST,
        ),
        Case("an empty batch", b"[]", None, INVALID_REQUEST),
        Case("a number", b"42", None, INVALID_REQUEST),
        Case("a string", b'"initialize"', None, INVALID_REQUEST),
        Case("null", b"null", None, INVALID_REQUEST),
        Case(
            "no jsonrpc member",
            msg({"id": 57, "method": "initialize", "params": init}),
            57,
            INVALID_REQUEST,
        ),
        Case(
            "jsonrpc 1.0",
            msg({"jsonrpc": "1.0", "id": 58, "method": "initialize", "params": init}),
            58,
            INVALID_REQUEST,
        ),
        Case(
            "jsonrpc as a number",
            msg({"jsonrpc": 2.0, "id": 59, "method": "initialize"}),
            59,
            INVALID_REQUEST,
        ),
        Case(
            "method is a number",
            msg({"jsonrpc": "2.0", "id": 60, "method": 5}),
            60,
            INVALID_REQUEST,
        ),
        Case(
            "method is null", msg({"jsonrpc": "2.0", "id": 61, "method": None}), 61, INVALID_REQUEST
        ),
        Case("id is true", req(True, "initialize", init), None, INVALID_REQUEST),
        Case("id is a float", req(1.5, "initialize", init), None, INVALID_REQUEST),
        Case("id is an object", req({"n": 1}, "initialize", init), None, INVALID_REQUEST),
        Case("id is an array", req([62], "initialize", init), None, INVALID_REQUEST),
        Case("neither method nor id", msg({"jsonrpc": "2.0", "params": {}}), None, INVALID_REQUEST),
        Case("unknown method", req(63, "foo/bar", {}), 63, METHOD_NOT_FOUND),
        Case("unknown extension method", req(64, "_vendor/x", {}), 64, METHOD_NOT_FOUND),
        Case(
            "extension method, string id",
            req("ext-1", "_zed.dev/thing", {"a": 1}),
            "ext-1",
            METHOD_NOT_FOUND,
        ),
        Case(
            "session/load without cwd",
            req(65, "session/load", {"sessionId": "s"}),
            65,
            INVALID_PARAMS,
            "cwd",
        ),
        Case(
            "session/load of no stored session",
            req(66, "session/load", {"sessionId": "nope", "cwd": "/", "mcpServers": []}),
            66,
            INVALID_PARAMS,
            "sessionId",
        ),
        Case("params is an array", req(67, "initialize", [1]), 67, INVALID_PARAMS, "params"),
        Case("params is a string", req(68, "session/new", "x"), 68, INVALID_PARAMS, "params"),
        no_reply(
            "unknown notification", msg({"jsonrpc": "2.0", "method": "foo/changed", "params": {}})
        ),
        no_reply(
            "unknown extension notification",
            msg({"jsonrpc": "2.0", "method": "_vendor/note", "params": {"x": 1}}),
        ),
        no_reply("notification without params", msg({"jsonrpc": "2.0", "method": "_vendor/bare"})),
        no_reply(
            "session/cancel with bad params",
            msg({"jsonrpc": "2.0", "method": "session/cancel", "params": [1]}),
        ),
        no_reply(
            "session/cancel without sessionId",
            msg({"jsonrpc": "2.0", "method": "session/cancel", "params": {}}),
        ),
        no_reply(
            "session/cancel with a numeric sessionId",
            msg({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 5}}),
        ),
        no_reply(
            "$/cancel_request for an unknown id",
            msg({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 12345}}),
        ),
        no_reply(
            "response to a request never sent", msg({"jsonrpc": "2.0", "id": 999, "result": {}})
        ),
        no_reply(
            "string-id response never sent", msg({"jsonrpc": "2.0", "id": "x1", "result": None})
        ),
        no_reply(
            "error response never sent",
            msg({"jsonrpc": "2.0", "id": 998, "error": {"code": -1, "message": "no"}}),
        ),
        no_reply(
            "null-id error response",
            msg(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            ),
        ),
    ]


def check_case(case: Case, replies: list[Json]) -> str | None:
    """A description of what went wrong, or None."""
    if case.code is None:
        if replies:
            return f"{case.name}: expected no answer, got {replies}"
        return None
    if len(replies) != 1:
        return f"{case.name}: expected one answer (id {case.id!r}, {case.code}), got {replies}"
    reply = replies[0]
    error = reply.get("error")
    if "id" not in reply or reply["id"] != case.id or type(reply["id"]) is not type(case.id):
        return f"{case.name}: answered with id {reply.get('id')!r}, expected {case.id!r}: {reply}"
    if not isinstance(error, dict) or error.get("code") != case.code:
        return f"{case.name}: expected error code {case.code}, got {reply}"
    if not isinstance(error.get("message"), str):
        return f"{case.name}: the error has no message: {reply}"
    if case.field is not None:
        data = error.get("data")
        if not isinstance(data, dict) or data.get("field") != case.field:
            return f"{case.name}: expected data.field {case.field!r}, got {reply}"
    return None


# -- the test ------------------------------------------------------------------------


@pytest.mark.slow
async def test_bad_frames_between_valid_ones(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    cwd = str(tmp_path)
    answer, reasoning = script_texts(HELLO)
    failures: list[str] = []
    async with start_bridge(state_dir, script=HELLO, stderr=tmp_path / "stderr.txt") as peer:
        process = peer.agent
        with anyio.fail_after(60):
            init = await peer.request("initialize", {"protocolVersion": 1})
            assert init["result"]["protocolVersion"] == 1
            new = {"cwd": cwd, "mcpServers": []}
            session_a = (await peer.request("session/new", new))["result"]["sessionId"]
            session_b = (await peer.request("session/new", new))["result"]["sessionId"]
            session_c = (await peer.request("session/new", new))["result"]["sessionId"]

            # The corpus, each frame between valid ones.
            for case in [*protocol_cases(), *field_cases(session_a, cwd)]:
                problem = check_case(case, await peer.exchange(case.frame))
                if problem is not None:
                    failures.append(problem)
                if process.returncode is not None:
                    failures.append(f"the bridge exited after {case.name}")
                    break

            # A cancel for an unknown session and for an idle one: no answer.
            for sid in ("sess_unknown", session_a):
                note = {
                    "jsonrpc": "2.0",
                    "method": "session/cancel",
                    "params": {"sessionId": sid},
                }
                replies = await peer.exchange(msg(note))
                if replies:
                    failures.append(f"session/cancel for {sid} was answered: {replies}")

            # A duplicate of an in-flight request id is refused at once (-32600, id
            # null, the id in its data); the first one is not touched and finishes.
            start = len(peer.messages)
            prompt_b = {"sessionId": session_b, "prompt": [{"type": "text", "text": "hi"}]}
            await peer.send_raw(
                req("dup", "session/prompt", prompt_b)
                + b"\n"
                + req("dup", "initialize", {"protocolVersion": 1})
                + b"\n"
            )
            done = await peer.wait_for(lambda m: is_response(m, "dup") and "result" in m, start, 15)
            dup_answers = [m for m in peer.messages[start:] if is_response(m, "dup")]
            if len(dup_answers) != 1:
                failures.append(f"duplicate in-flight id: two answers with its id {dup_answers}")
            refusals = [
                m
                for m in peer.messages[start:]
                if is_response(m, None) and m["error"].get("data", {}).get("requestId") == "dup"
            ]
            if [m["error"]["code"] for m in refusals] != [INVALID_REQUEST]:
                failures.append(f"duplicate in-flight id: not refused once, {refusals}")
            if done["result"] != {"stopReason": "end_turn"}:
                failures.append(f"the prompt whose id was duplicated ended with {done}")

            # A huge but valid prompt frame (5 MB of text).
            huge = "0123456789abcdef" * (5 * 1024 * 1024 // 16)
            start = len(peer.messages)
            big = await peer.request(
                "session/prompt",
                {"sessionId": session_c, "prompt": [{"type": "text", "text": huge}]},
                within=30,
            )
            if big.get("result") != {"stopReason": "end_turn"}:
                failures.append(f"the 5 MB prompt was answered with {str(big)[:300]}")
            if (
                chunk_text(session_updates(peer.messages[start:], session_c), "agent_message_chunk")
                != answer
            ):
                failures.append("the 5 MB prompt's turn did not stream the scripted answer")

            # The session made before all of this still works, and was not cancelled.
            start = len(peer.messages)
            final = await peer.request(
                "session/prompt",
                {"sessionId": session_a, "prompt": [{"type": "text", "text": "Hello?"}]},
            )
            assert final.get("result") == {"stopReason": "end_turn"}, final
            updates = session_updates(peer.messages[start:], session_a)
            assert chunk_text(updates, "agent_message_chunk") == answer
            assert chunk_text(updates, "agent_thought_chunk") == reasoning

            assert process.returncode is None, "the bridge exited"
        returncode = await peer.finish(within=15)

    assert returncode == 0
    assert peer.bad_lines == [], f"non-JSON-RPC lines on stdout: {peer.bad_lines[:5]}"
    # Every answer is to a request we sent: updates and responses only.
    for m in peer.messages:
        assert m.get("method") in (None, "session/update"), m
    logs = {p.stem: read_records(p) for p in sorted((state_dir / "sessions").glob("*.jsonl"))}
    assert set(logs) == {session_a, session_b, session_c}
    for records in logs.values():
        check_log(records)
    huge_user = [r for r in logs[session_c] if r["type"] == "user/message"]
    assert huge_user[0]["content"] == [{"type": "text", "text": huge}]
    assert not failures, "bad input handled wrongly:\n" + "\n".join(failures)
