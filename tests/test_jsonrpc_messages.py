"""parse_frame: every JSON-RPC 2.0 error case, and never an exception."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.jsonrpc.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    RpcError,
)
from acp_bridge.jsonrpc.framing import FrameTooLarge
from acp_bridge.jsonrpc.messages import (
    Notification,
    Request,
    Response,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
)


def raw(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def parse_error_of(frame: bytes) -> RpcError:
    msg = parse_frame(frame)
    assert isinstance(msg, RpcError), f"{frame!r} parsed as {msg!r}, expected an error"
    return msg


def wire_reply(error: RpcError) -> dict[str, Any]:
    """What the connection would write for this error (it must encode)."""
    decoded: dict[str, Any] = orjson.loads(encode_error(error.id, error))
    return decoded


# -- -32700 parse errors -------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        b"{",
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"',
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1,}',
        b"{'jsonrpc': '2.0'}",
        b'{"jsonrpc": "2.0", "id": 1, "method": "x"} trailing',
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": 1e999}',
        b'"\\ud800"',  # a lone surrogate escape
        b"[" * 5000 + b"]" * 5000,  # nesting too deep for the parser
    ],
)
def test_bad_json_is_a_parse_error_with_null_id(frame: bytes) -> None:
    error = parse_error_of(frame)
    assert error.code == PARSE_ERROR
    assert error.id is None
    reply = wire_reply(error)
    assert reply["id"] is None
    assert reply["error"]["code"] == PARSE_ERROR


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "\xff"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "\xc3("}',
        b'{"jsonrpc": "2.0", "id": "\xed\xa0\x80", "method": "x"}',  # encoded surrogate
        b"\xfe\xff",
        b'{"jsonrpc": "2.0", "method": "n", "params": {"t": "\x80"}}',  # a notification
    ],
)
def test_invalid_utf8_is_a_parse_error_with_null_id(frame: bytes) -> None:
    error = parse_error_of(frame)
    assert error.code == PARSE_ERROR
    assert error.id is None
    assert wire_reply(error)["id"] is None


# -- -32600 invalid requests ---------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [1, -3.5, "a string", None, True, False, [], [1, 2]],
    ids=repr,
)
def test_non_objects_are_invalid_requests(value: Any) -> None:
    error = parse_error_of(raw(value))
    assert error.code == INVALID_REQUEST
    assert error.id is None


def test_batch_is_an_invalid_request_with_null_id() -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}},
    ]
    error = parse_error_of(raw(batch))
    assert error.code == INVALID_REQUEST
    assert error.id is None
    assert "batch" in str(error.data)


@pytest.mark.parametrize(
    "version",
    [None, "1.0", "2", 2.0, 2, "2.0 ", ["2.0"]],
    ids=repr,
)
@pytest.mark.parametrize("rid", [1, "req-1"])
def test_wrong_jsonrpc_version_is_an_invalid_request(version: Any, rid: int | str) -> None:
    obj: dict[str, Any] = {"id": rid, "method": "initialize", "params": {}}
    if version is not None:
        obj["jsonrpc"] = version
    error = parse_error_of(raw(obj))
    assert error.code == INVALID_REQUEST
    # The id was readable: the reply goes to that request.
    assert error.id == rid
    assert wire_reply(error)["id"] == rid


@pytest.mark.parametrize("method", [5, None, True, ["x"], {"name": "x"}, 1.5], ids=repr)
def test_non_string_method_is_an_invalid_request(method: Any) -> None:
    error = parse_error_of(raw({"jsonrpc": "2.0", "id": 9, "method": method}))
    assert error.code == INVALID_REQUEST
    assert error.id == 9


@pytest.mark.parametrize("method", [5, True, ["x"]], ids=repr)
def test_non_string_method_of_a_notification_is_an_invalid_request(method: Any) -> None:
    error = parse_error_of(raw({"jsonrpc": "2.0", "method": method}))
    assert error.code == INVALID_REQUEST
    assert error.id is None


@pytest.mark.parametrize(
    "rid",
    [True, False, 1.5, 1.0, -0.0, {"n": 1}, [1], None],
    ids=repr,
)
def test_bad_ids_are_invalid_requests_answered_with_null_id(rid: Any) -> None:
    error = parse_error_of(raw({"jsonrpc": "2.0", "id": rid, "method": "initialize"}))
    assert error.code == INVALID_REQUEST
    assert error.id is None
    assert wire_reply(error)["id"] is None


def test_neither_method_nor_id_is_an_invalid_request() -> None:
    error = parse_error_of(raw({"jsonrpc": "2.0", "params": {}}))
    assert error.code == INVALID_REQUEST
    assert error.id is None


def test_response_without_result_or_error_is_an_invalid_request() -> None:
    for obj in (
        {"jsonrpc": "2.0", "id": 3},
        {"jsonrpc": "2.0", "id": 3, "error": "boom"},
        {"jsonrpc": "2.0", "id": 3, "error": [1]},
    ):
        error = parse_error_of(raw(obj))
        assert error.code == INVALID_REQUEST


def test_frame_too_large_is_an_invalid_request() -> None:
    error = parse_frame(FrameTooLarge(size=100, limit=10))
    assert isinstance(error, RpcError)
    assert error.code == INVALID_REQUEST
    assert error.id is None
    assert "100" in str(error.data)
    assert "10" in str(error.data)


# -- params --------------------------------------------------------------------------


@pytest.mark.parametrize("params", [[1, 2], "x", 5, True], ids=repr)
def test_request_with_non_object_params_is_invalid_params_for_that_id(params: Any) -> None:
    error = parse_error_of(raw({"jsonrpc": "2.0", "id": 12, "method": "x", "params": params}))
    assert error.code == INVALID_PARAMS
    assert error.data["field"] == "params"
    assert error.id == 12, (
        "an invalid-params error for a request whose id was readable must answer that id "
        f"(JSON-RPC 2.0 section 5), but parse_frame left id={error.id!r}: the client "
        "waiting for request 12 would never get its answer"
    )


@pytest.mark.parametrize("params", [[1, 2], "x", 5], ids=repr)
def test_notification_with_non_object_params_gets_empty_params(params: Any) -> None:
    msg = parse_frame(raw({"jsonrpc": "2.0", "method": "session/cancel", "params": params}))
    assert msg == Notification("session/cancel", {})


# -- valid messages ------------------------------------------------------------------


@pytest.mark.parametrize("rid", [0, 1, -7, 2**53, 2**63 - 1, "", "abc", "é\u2028"], ids=repr)
def test_requests(rid: int | str) -> None:
    msg = parse_frame(raw({"jsonrpc": "2.0", "id": rid, "method": "m", "params": {"a": [1]}}))
    assert msg == Request(rid, "m", {"a": [1]})


def test_request_params_optional_or_null() -> None:
    assert parse_frame(raw({"jsonrpc": "2.0", "id": 1, "method": "m"})) == Request(1, "m", {})
    assert parse_frame(raw({"jsonrpc": "2.0", "id": 1, "method": "m", "params": None})) == (
        Request(1, "m", {})
    )


def test_notifications() -> None:
    assert parse_frame(raw({"jsonrpc": "2.0", "method": "n"})) == Notification("n", {})
    msg = parse_frame(
        raw({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
    )
    assert msg == Notification("session/cancel", {"sessionId": "s"})
    # An underscore extension notification is still just a notification.
    assert parse_frame(raw({"jsonrpc": "2.0", "method": "_vendor/x", "params": {}})) == (
        Notification("_vendor/x", {})
    )


@pytest.mark.parametrize("result", [None, 0, "x", [1], {"a": {"b": None}}], ids=repr)
def test_result_responses(result: Any) -> None:
    assert parse_frame(raw({"jsonrpc": "2.0", "id": 4, "result": result})) == Response(
        4, result=result
    )


def test_error_responses() -> None:
    error = {"code": -32601, "message": "Method not found", "data": {"method": "x"}}
    assert parse_frame(raw({"jsonrpc": "2.0", "id": "r", "error": error})) == Response(
        "r", error=error
    )
    # An error response to a request whose id could not be read has a null id.
    assert parse_frame(raw({"jsonrpc": "2.0", "id": None, "error": error})) == Response(
        None, error=error
    )


def test_encoders_round_trip() -> None:
    assert parse_frame(encode_request(5, "m", {"a": 1}).rstrip(b"\n")) == Request(5, "m", {"a": 1})
    assert parse_frame(encode_notification("n", {"b": 2}).rstrip(b"\n")) == Notification(
        "n", {"b": 2}
    )
    assert parse_frame(encode_result(6, {"ok": True}).rstrip(b"\n")) == Response(
        6, result={"ok": True}
    )
    err = RpcError.method_not_found("nope")
    assert parse_frame(encode_error(7, err).rstrip(b"\n")) == Response(7, error=err.to_wire())
    for encoded in (encode_request(1, "m", {}), encode_result(1, None)):
        assert encoded.endswith(b"\n")
        assert encoded.count(b"\n") == 1


# -- fuzz: nothing raises ------------------------------------------------------------


def check_outcome(msg: object) -> None:
    """A parse outcome is one of the four kinds, well-typed, and encodable."""
    if isinstance(msg, RpcError):
        assert msg.code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)
        assert msg.id is None or type(msg.id) is int or isinstance(msg.id, str)
        orjson.loads(encode_error(msg.id, msg))
    elif isinstance(msg, Request):
        assert type(msg.id) is int or isinstance(msg.id, str)
        assert isinstance(msg.method, str)
        assert isinstance(msg.params, dict)
    elif isinstance(msg, Notification):
        assert isinstance(msg.method, str)
        assert isinstance(msg.params, dict)
    else:
        assert isinstance(msg, Response), f"unexpected parse outcome {msg!r}"
        assert msg.id is None or type(msg.id) is int or isinstance(msg.id, str)
        assert msg.error is None or isinstance(msg.error, dict)


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
# Objects that look like JSON-RPC messages, with each member present or not and
# of a random type, so the checks after the first one are reached too.
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"]) | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
        "method": st.sampled_from(["initialize", "session/prompt", "_x"]) | json_values,
        "params": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
        "result": json_values,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text()}) | json_values,
    },
)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(data: bytes) -> None:
    check_outcome(parse_frame(data))


@settings(max_examples=300, deadline=None)
@given(json_values | envelopes)
@pytest.mark.slow
def test_fuzz_random_json_values(value: Any) -> None:
    # Python's encoder is more liberal than the parser (big integers, lone
    # surrogates): whatever it writes must still come back as an outcome.
    check_outcome(parse_frame(json.dumps(value).encode()))
    check_outcome(parse_frame(json.dumps(value, ensure_ascii=False).encode("utf-8", "replace")))


@settings(max_examples=300, deadline=None)
@given(envelopes, st.integers(min_value=0, max_value=200), st.binary(min_size=1, max_size=3))
@pytest.mark.slow
def test_fuzz_corrupted_envelopes(value: dict[str, Any], at: int, junk: bytes) -> None:
    encoded = json.dumps(value).encode()
    at %= len(encoded) + 1
    check_outcome(parse_frame(encoded[:at] + junk + encoded[at:]))
    check_outcome(parse_frame(encoded[:at]))
