"""JSON-RPC 2.0 message values: parsing frames and encoding replies, free of I/O.

`parse_frame` turns one frame into a `Request`, `Notification` or `Response`,
or into an `RpcError` that says what to answer (its ``id`` is the request's
id when the frame got far enough to have one, else ``None`` as JSON-RPC
requires for parse errors).  Params stay raw dicts: validating them is the
dispatcher's business, per method, but for their depth: a frame nested
deeper than `acp_bridge.json_depth.MAX_DEPTH` levels is refused here, the
one place every frame passes (a request gets ``-32602`` naming the field; an
answer to one of our requests becomes an error answer; a notification's
handler sees empty params), so that nothing read is too deep to be logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson

from ..json_depth import MAX_DEPTH, field_name, too_deep
from ..log.errors import json_kind
from .errors import INVALID_REQUEST, RequestId, RpcError
from .framing import FrameTooLarge


@dataclass(frozen=True, slots=True)
class Request:
    id: int | str
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


Message = Request | Notification | Response


def _valid_id(value: Any) -> bool:
    # bool is an int subclass in Python; JSON-RPC ids are strings or integers.
    return (type(value) is int) or isinstance(value, str)


def parse_frame(frame: bytes | FrameTooLarge, *, bounded: bool = True) -> Message | RpcError:
    """``bounded=False`` for a reader that bounds the depth of what it keeps
    itself (an MCP server's tools, admitted one by one)."""
    msg = _parse(frame)
    # Fewer brackets than the limit cannot nest deeper (two fast counts).
    if isinstance(msg, RpcError) or isinstance(frame, FrameTooLarge) or not bounded:
        return msg
    if frame.count(b"{") + frame.count(b"[") < MAX_DEPTH:
        return msg
    return _bounded(msg)


def _bounded(msg: Message) -> Message | RpcError:
    """``msg``, or what stands for it when its frame nests deeper than
    `MAX_DEPTH` (the frame is level 1, its params level 2)."""
    detail = f"nests deeper than {MAX_DEPTH} levels (counted from the frame)"
    if isinstance(msg, Response):
        path = too_deep(msg.result if msg.error is None else msg.error, MAX_DEPTH - 2)
        if path is None:
            return msg
        refused = {"code": INVALID_REQUEST, "message": f"the answer {detail}: refused"}
        return Response(msg.id, error=refused)
    path = too_deep(msg.params, MAX_DEPTH - 2)
    if path is None:
        return msg
    if isinstance(msg, Notification):
        return Notification(msg.method, {})  # as for params that are not an object
    error = RpcError.invalid_params(field_name(path), detail)
    error.id = msg.id
    return error


def _parse(frame: bytes | FrameTooLarge) -> Message | RpcError:
    if isinstance(frame, FrameTooLarge):
        return RpcError.invalid_request(
            f"frame of {frame.size} bytes exceeds the {frame.limit}-byte limit"
        )
    obj = _decode(frame)
    if isinstance(obj, RpcError):
        return obj
    if not isinstance(obj, dict):
        batch = " (JSON-RPC batches are not part of ACP)" if isinstance(obj, list) else ""
        return RpcError.invalid_request(f"expected a JSON object, got {json_kind(obj)}{batch}")
    raw_id = obj.get("id", _MISSING)
    has_id = raw_id is not _MISSING
    id_ok = has_id and _valid_id(raw_id)
    reply_id: RequestId = raw_id if id_ok else None
    if obj.get("jsonrpc") != "2.0":
        return RpcError.invalid_request('"jsonrpc" must be "2.0"', id=reply_id)
    method = obj.get("method", _MISSING)
    if method is _MISSING:
        if not has_id:
            return RpcError.invalid_request("neither a method nor an id")
        if "result" in obj:
            return Response(raw_id if id_ok else None, result=obj["result"])
        error = obj.get("error")
        if isinstance(error, dict):
            return Response(raw_id if id_ok else None, error=error)
        return RpcError.invalid_request("a response needs a result or an error object")
    if not isinstance(method, str):
        return RpcError.invalid_request('"method" must be a string', id=reply_id)
    params = obj.get("params", {})
    if params is None:
        params = {}
    if has_id and not id_ok:
        return RpcError.invalid_request('"id" must be a string or an integer')
    if not isinstance(params, dict):
        if has_id:
            error = RpcError.invalid_params("params", "must be an object")
            error.id = raw_id
            return error
        # A notification gets no reply, even an error; its handler sees empty
        # params and reports the missing fields on stderr.
        return Notification(method, {})
    if has_id:
        return Request(raw_id, method, params)
    return Notification(method, params)


def _decode(frame: bytes) -> Any:
    try:
        return orjson.loads(frame)
    except orjson.JSONDecodeError as exc:
        try:
            frame.decode("utf-8")
        except UnicodeDecodeError as bad:
            return RpcError.parse_error(f"not valid UTF-8 at byte {bad.start}")
        return RpcError.parse_error(str(exc))


_MISSING: Any = object()


# Each frame's newline written by the encoder (not a copy of the frame to add it).
_LINE: Final = orjson.OPT_APPEND_NEWLINE


def encode_result(id: RequestId, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id, "result": result}, option=_LINE)


def encode_error(id: RequestId, error: RpcError) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": id, "error": error.to_wire()}, option=_LINE)


def encode_notification(method: str, params: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params}, option=_LINE)


def encode_request(id: RequestId, method: str, params: Any) -> bytes:
    frame = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    return orjson.dumps(frame, option=_LINE)
