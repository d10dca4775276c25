"""A fuzz of the whole dispatch layer, in process: framing, parsing, routing, handlers.

Each example serves the bridge on two pipes (see `pipe_peer.bridge_on_pipes`),
opens one session properly, then writes a random sequence of frames, in
random pieces: requests and notifications of every method, valid or mutated
(a field removed, a field of the wrong type, an extra field, at any depth;
a wrong envelope: id, jsonrpc, method or params), random bytes, truncated
frames (newline-terminated or running into the next frame), invalid UTF-8,
prompts whose ``_meta`` nests up to the parser's 1,024 levels,
raw U+2028/U+2029 in strings, frames of a few MB, JSON-RPC batches, ids
drawn from a small pool (so duplicates, also while in flight), and
responses to requests the bridge never sent.  Then a final ``initialize``.

The bridge's framer splits the bytes into frames; the model classifies each
frame with the same JSON decoder (orjson) and expects:

* a request with a readable id (an integer or a string) gets one response:
  with that id, or, when it reuses the id of a request still in flight, a
  -32600 with id null and the id in ``data.requestId``; n requests with one
  id get n responses in all;
* a frame that is not JSON gets exactly one -32700 with id null;
* a well-formed response or a well-formed notification gets no answer;
* any other frame gets at most one answer, with id null or its own id;
* every response has exactly one of result and error, and an error has an
  integer code among the JSON-RPC and ACP codes and a string message;
* every output line is a JSON-RPC 2.0 object, every ``session/update``
  names a session that ``session/new`` returned;
* the final ``initialize`` is answered with a result (the process serves
  on), the bridge exits 0 when stdin closes, no handler raised an unexpected
  exception (nothing logged with a traceback), and `check_log` accepts every
  session log.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.harness import cwd_for_tests
from support.pipe_peer import Json, bridge_on_pipes, id_key, is_response

from acp_bridge.client import AcpClient
from acp_bridge.jsonrpc.errors import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
)
from acp_bridge.jsonrpc.framing import FrameTooLarge, LineFramer
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

KNOWN_CODES = frozenset(
    {
        PARSE_ERROR,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        INVALID_PARAMS,
        INTERNAL_ERROR,
        REQUEST_CANCELLED,
        AUTH_REQUIRED,
        RESOURCE_NOT_FOUND,
    }
)
CWD = cwd_for_tests()
# A cwd with a raw U+2028 in its name (session/new wants one that exists).
ODD_CWD = os.path.join(CWD, "a\u2028b")
os.makedirs(ODD_CWD, exist_ok=True)
SCRIPT: Json = {
    "when_exhausted": "repeat_last",
    "responses": [{"events": [{"text": "a fuzzed answer", "chunk_size": 5, "chunk_delay_ms": 1}]}],
}
# Replaced by the id of the session opened before the fuzzed frames.
SESSION = "@@SESSION@@"
SETUP_IDS = ("setup-initialize", "setup-new")
PING_ID = "final-ping"

# -- strategies ----------------------------------------------------------------------

texts = st.text(
    alphabet=st.sampled_from([*"ab /.\n\t\\\"'{}", "\u2028", "\u2029", "\x85", "\x00", "é", "🙂"]),
    max_size=16,
)
pool_ids = st.sampled_from([1, 2, 3, 0, -7, "a", "b", "1", "\u2028"])
unreadable_ids = st.sampled_from([True, False, 1.5, None, [1], {"n": 1}, 2**64, -(2**70)])
# Copied on every draw: a mutation may later change a drawn list or dict in place.
wrong_values = st.sampled_from(
    [None, True, False, 0, -1, 2**53, 1.5, "", "x", "relative/dir", "\u2028", [], [1], {}, {"a": 1}]
).map(copy.deepcopy)
session_ids = st.sampled_from([SESSION, SESSION, SESSION, "sess_unknown", ""])

texts_blocks = st.builds(lambda t: {"type": "text", "text": t}, texts)
blocks = st.one_of(
    texts_blocks,
    st.builds(
        lambda name: {"type": "resource_link", "uri": "file:///w/" + name, "name": name},
        texts,
    ),
    st.builds(lambda t: {"type": "resource", "resource": {"uri": "file:///w/a", "text": t}}, texts),
    st.just({"type": "resource", "resource": {"uri": "file:///w/b", "blob": "AAEC"}}),
    st.just({"type": "image", "data": "AA==", "mimeType": "image/png"}),
)

VALID_PARAMS: dict[str, st.SearchStrategy[Json]] = {
    "initialize": st.fixed_dictionaries(
        {"protocolVersion": st.sampled_from([1, 1, 2, 0])},
        optional={
            "clientCapabilities": st.just(
                {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
            ),
            "clientInfo": st.just({"name": "fuzz", "version": "1"}),
        },
    ),
    "session/new": st.fixed_dictionaries(
        {
            "cwd": st.sampled_from([CWD, ODD_CWD, "/"]),
            "mcpServers": st.sampled_from(
                [[], [{"name": "m", "command": "/bin/true", "args": [], "env": []}]]
            ),
        }
    ),
    "session/prompt": st.fixed_dictionaries(
        {"sessionId": session_ids, "prompt": st.lists(blocks, min_size=1, max_size=3)}
    ),
    "session/cancel": st.fixed_dictionaries({"sessionId": session_ids}),
    "$/cancel_request": st.fixed_dictionaries({"requestId": pool_ids}),
    "session/load": st.just({"sessionId": SESSION, "cwd": CWD, "mcpServers": []}),
    "authenticate": st.just({"methodId": "none"}),
    "_vendor/ext": st.just({"x": 1}),
    "no/such": st.just({}),
}
NOTIFICATIONS = frozenset({"session/cancel", "$/cancel_request"})
# Prompts, sessions and cancels more often than the rest.
METHODS = sorted(VALID_PARAMS) + ["session/prompt"] * 3 + ["session/new", "session/cancel"]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of every value nested in ``value`` (not ``value`` itself)."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        yield (*prefix, key)
        if isinstance(item, dict | list) and item:
            yield from paths(item, (*prefix, key))


def containers(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The paths of the dicts in ``value``, itself included."""
    if isinstance(value, dict):
        yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, dict | list):
            yield from containers(item, (*prefix, key))


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


@st.composite
def mutated(draw: st.DrawFn, params: Json) -> Json:
    """``params`` with zero to three random changes: a field removed, a field of the
    wrong type, or an extra field, at any depth."""
    params = json.loads(json.dumps(params))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        op = draw(st.sampled_from(["remove", "wrong", "extra"]))
        all_paths = list(paths(params))
        if op == "extra" or not all_paths:
            where = draw(st.sampled_from(list(containers(params))))
            at(params, where)[draw(st.sampled_from(["extra", "_meta", "zz\u2028"]))] = draw(
                wrong_values
            )
            continue
        path = draw(st.sampled_from(all_paths))
        parent = at(params, path[:-1])
        if op == "remove":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(wrong_values)
    return params


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """A request or notification, valid or mutated (params and envelope)."""
    method = draw(st.sampled_from(METHODS))
    params: Any = draw(mutated(draw(VALID_PARAMS[method])))
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    notification = method in NOTIFICATIONS
    if draw(st.integers(0, 9)) == 0:
        notification = not notification
    if not notification:
        message["id"] = draw(st.one_of(pool_ids, pool_ids, pool_ids, unreadable_ids))
    if draw(st.integers(0, 6)) == 0:
        key = draw(st.sampled_from(["jsonrpc", "method", "params", "id"]))
        if draw(st.booleans()):
            message.pop(key, None)
        else:
            message[key] = draw(st.one_of(wrong_values, st.just("1.0")))
    return message


def render(value: Any) -> bytes:
    """JSON with raw non-ASCII (U+2028 stays a raw character) and big integers."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


responses_never_sent = st.builds(
    lambda rid, error: {
        "jsonrpc": "2.0",
        "id": rid,
        **({"error": {"code": -32603, "message": "no"}} if error else {"result": {}}),
    },
    st.one_of(pool_ids, st.just("never-sent"), st.just(None)),
    st.booleans(),
)
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    """One frame with its line ending (a truncated frame may have none)."""
    kind = draw(
        st.sampled_from(
            ["message"] * 8
            + ["prompt"] * 3
            + ["response", "response", "bytes", "truncated", "utf8", "batch", "blank", "deep"]
            + ["huge"] * (1 if draw(st.integers(0, 3)) == 0 else 0)
        )
    )
    end = draw(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n"]))
    if kind == "message":
        return render(draw(messages())) + end
    if kind == "prompt":
        # A valid prompt to the open session: a turn that streams (and may be
        # cancelled, or see its id reused, by the frames that follow).
        params: Json = {"sessionId": SESSION, "prompt": draw(st.lists(texts_blocks, min_size=1))}
        if draw(st.booleans()):
            params["_meta"] = {"extra": True}
        prompt = {"jsonrpc": "2.0", "id": draw(pool_ids), "method": "session/prompt"}
        return render({**prompt, "params": params}) + end
    if kind == "response":
        return render(draw(responses_never_sent)) + end
    if kind == "bytes":
        return draw(st.binary(min_size=1, max_size=64)) + end
    if kind == "truncated":
        whole = render(draw(messages()))
        cut = draw(st.integers(1, len(whole) - 1))
        return whole[:cut] + draw(st.sampled_from([b"", b"\n"]))
    if kind == "utf8":
        message = draw(messages())
        message["x"] = "@@BAD@@"
        return render(message).replace(b"@@BAD@@", draw(st.sampled_from(INVALID_UTF8))) + end
    if kind == "batch":
        return render(draw(st.lists(messages(), max_size=3))) + end
    if kind == "blank":
        return draw(st.sampled_from([b"\n", b"\r\n", b"  \n"]))
    if kind == "deep":
        # A prompt whose _meta (or a resource's) nests from a little under the
        # bound to past what the encoder writes, up to what the parser reads.
        levels = draw(st.sampled_from([120, 124, 125, 126, 250, 260, 1015]))
        meta = '{"a":' * levels + "1" + "}" * levels
        block = draw(
            st.sampled_from(
                [
                    '{"type":"text","text":"deep","_meta":@}',
                    '{"type":"resource","resource":{"uri":"file:///a","text":"t","_meta":@}}',
                ]
            )
        ).replace("@", meta)
        deep_id = render(draw(pool_ids)).decode()
        return (
            '{"jsonrpc":"2.0","id":' + deep_id + ',"method":"session/prompt","params":'
            '{"sessionId":"' + SESSION + '","prompt":[' + block + "]}}"
        ).encode() + end
    # A few MB: a prompt with a long text, or a long line of junk.
    size = draw(st.integers(1, 3)) * 1024 * 1024 + draw(st.integers(0, 999))
    if draw(st.booleans()):
        text = "x" * size
        prompt = {"sessionId": SESSION, "prompt": [{"type": "text", "text": text}]}
        rid = draw(pool_ids)
        return (
            render({"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": prompt})
            + end
        )
    return b"y" * size + end


# -- the model -----------------------------------------------------------------------


def readable_id(value: object) -> bool:
    return type(value) is int or isinstance(value, str)


@dataclass
class Expected:
    """What the answers to a byte stream must satisfy."""

    requests: Counter[bytes] = field(default_factory=Counter)  # exactly this many per id
    others: Counter[bytes] = field(default_factory=Counter)  # at most this many more
    parse_errors: int = 0  # exactly this many -32700, id null
    null_max: int = 0  # at most this many answers with id null (parse errors included)

    def frame(self, frame: bytes | FrameTooLarge) -> None:
        if isinstance(frame, FrameTooLarge):
            self.null_max += 1
            return
        try:
            obj = orjson.loads(frame)
        except orjson.JSONDecodeError:
            self.parse_errors += 1
            self.null_max += 1
            return
        if not isinstance(obj, dict):
            self.null_max += 1
            return
        rid = obj.get("id")
        has_readable_id = "id" in obj and readable_id(rid)
        if "method" in obj and has_readable_id:
            self.requests[id_key(rid)] += 1
            return
        well_formed = obj.get("jsonrpc") == "2.0"
        response = "result" in obj or isinstance(obj.get("error"), dict)
        if well_formed and "method" not in obj and "id" in obj and response:
            return  # a response: never answered
        if well_formed and isinstance(obj.get("method"), str) and "id" not in obj:
            return  # a notification: never answered
        self.null_max += 1
        if has_readable_id:
            self.others[id_key(rid)] += 1


def expected_for(stream: bytes) -> Expected:
    expected = Expected()
    for frame in LineFramer().feed(stream):
        expected.frame(frame)
    return expected


# -- running ---------------------------------------------------------------------------


class TracebackCatcher(logging.Handler):
    """Collects the bridge's log records that carry a traceback (unexpected exceptions)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.caught: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.caught.append(self.format(record))


@dataclass
class Outcome:
    peer: AcpClient
    status: int | None
    sessions: set[str]
    state_dir: str
    pong: Json | None


def ping() -> bytes:
    return render(
        {"jsonrpc": "2.0", "id": PING_ID, "method": "initialize", "params": {"protocolVersion": 1}}
    )


async def play(stream: list[bytes], cuts: list[int], state_dir: str) -> tuple[Outcome, bytes]:
    sessions: set[str] = set()
    async with bridge_on_pipes(SCRIPT, state_dir) as served:
        peer = served.client

        def watch(msg: Json) -> None:
            result = msg.get("result")
            if is_response(msg) and isinstance(result, dict):
                session_id = result.get("sessionId")
                if isinstance(session_id, str):
                    sessions.add(session_id)

        peer.on_message = watch
        await peer.request("initialize", {"protocolVersion": 1}, rid=SETUP_IDS[0])
        resp = await peer.request("session/new", {"cwd": CWD, "mcpServers": []}, rid=SETUP_IDS[1])
        session_id = resp["result"]["sessionId"]
        data = b"".join(stream).replace(SESSION.encode(), session_id.encode())
        data += b"\n" + ping() + b"\n"
        start = 0
        for cut in sorted({min(c, len(data)) for c in cuts}):
            await peer.send_raw(data[start:cut])
            start = cut
        await peer.send_raw(data[start:])
        try:
            pong: Json | None = await peer.wait_response(PING_ID, within=15)
        except TimeoutError:
            pong = None
        if pong is not None:
            expected = expected_for(data)
            with anyio.move_on_after(30):
                # Polling: the prompts end by themselves within milliseconds.
                while any(  # noqa: ASYNC110
                    len(answers_to(peer, key)) < need for key, need in expected.requests.items()
                ):
                    await anyio.sleep(0.005)
    return Outcome(peer, served.status, sessions, state_dir, pong), data


def reused_id(msg: Json) -> bytes | None:
    """The id a refused duplicate reused (an answer with id null), else None."""
    error = msg.get("error") or {}
    data = error.get("data")
    if error.get("code") != INVALID_REQUEST or not isinstance(data, dict):
        return None
    return id_key(data["requestId"]) if "requestId" in data else None


def refusals(peer: AcpClient) -> Counter[bytes]:
    """The refused duplicates of ids in flight, by the id they reused."""
    reused = (reused_id(m) for m in peer.responses.get(b"null", []))
    return Counter(key for key in reused if key is not None)


def answers_to(peer: AcpClient, key: bytes) -> list[Json]:
    """The answers with id ``key``, and the refusals of duplicates of it."""
    refused = [m for m in peer.responses.get(b"null", []) if reused_id(m) == key]
    return [*peer.responses.get(key, ()), *refused]


def check(outcome: Outcome, data: bytes, caught: list[str]) -> None:
    peer = outcome.peer
    assert not caught, "the bridge raised unexpectedly:\n" + "\n".join(caught[:3])
    assert outcome.pong is not None, (
        "the final initialize got no answer within 15 s: the bridge stopped reading or "
        "dropped frames"
    )
    assert "result" in outcome.pong, f"the final initialize failed: {outcome.pong}"
    assert outcome.status == 0, f"exit status {outcome.status}"
    assert not peer.bad_lines, f"output lines that are not JSON-RPC: {peer.bad_lines[:3]}"
    expected_stream = expected_for(data)
    requests = expected_stream.requests + Counter(id_key(rid) for rid in SETUP_IDS)
    for msg in peer.messages:
        if is_response(msg):
            assert ("result" in msg) != ("error" in msg), f"not one of result and error: {msg}"
            if "error" in msg:
                error = msg["error"]
                assert type(error.get("code")) is int, f"error code not an integer: {msg}"
                assert error["code"] in KNOWN_CODES, f"unknown error code: {msg}"
                assert isinstance(error.get("message"), str), f"no message: {msg}"
        elif msg.get("method") == "session/update":
            session_id = msg["params"]["sessionId"]
            assert session_id in outcome.sessions, f"an update for an unknown session: {msg}"
        else:
            raise AssertionError(f"the bridge sent something else: {msg}")
    for key in peer.responses.keys() | refusals(peer).keys():
        if key == b"null":
            continue
        answers = answers_to(peer, key)
        need, extra = requests.get(key, 0), expected_stream.others.get(key, 0)
        assert need <= len(answers) <= need + extra, (
            f"id {key.decode()}: {need} request(s) with this id (and {extra} other frame(s)), "
            f"{len(answers)} answer(s): {answers[:4]}"
        )
    for key, need in requests.items():
        got = len(answers_to(peer, key))
        assert got >= need, f"id {key.decode()}: {need} request(s), {got} answer(s)"
    nulls = peer.responses.get(b"null", [])
    parse_errors = [m for m in nulls if m.get("error", {}).get("code") == PARSE_ERROR]
    assert len(parse_errors) == expected_stream.parse_errors, (
        f"{expected_stream.parse_errors} frames are not JSON, {len(parse_errors)} parse errors"
    )
    others = len(nulls) - refusals(peer).total()
    assert others <= expected_stream.null_max, (
        f"{others} answers with id null for {expected_stream.null_max} candidate frames"
    )
    sessions_dir = os.path.join(outcome.state_dir, "sessions")
    for name in sorted(os.listdir(sessions_dir)):
        check_log(read_records(os.path.join(sessions_dir, name)))


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@example(
    # Found by this fuzz: a requestId that is a list or an object.
    stream=[
        render({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": [1]}})
        + b"\n"
    ],
    cuts=[],
)
@given(
    stream=st.lists(frames(), max_size=14),
    cuts=st.lists(st.integers(0, 4096), max_size=4),
)
@pytest.mark.slow
def test_dispatch_survives_any_frames(stream: list[bytes], cuts: list[int]) -> None:
    catcher = TracebackCatcher()
    # asyncio logs an exception that escapes a callback, such as the stdin reader's.
    loggers = [logging.getLogger("acp_bridge"), logging.getLogger("asyncio")]
    for logger in loggers:
        logger.addHandler(catcher)
    try:
        with tempfile.TemporaryDirectory() as state_dir:

            async def main() -> tuple[Outcome, bytes]:
                return await play(stream, cuts, state_dir)

            outcome, data = anyio.run(main)
            check(outcome, data, catcher.caught)
    finally:
        for logger in loggers:
            logger.removeHandler(catcher)
