"""JSON-RPC 2.0 over newline-delimited JSON: framing, messages, errors, a connection.

The names below load their module on first use: the messages, the framing
and the errors need no event loop.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import Connection, ConnectionClosed, FrameWriter
    from .errors import RemoteError, RpcError
    from .framing import DEFAULT_MAX_FRAME, FrameTooLarge, LineFramer
    from .messages import Message, Notification, Request, Response, parse_frame

__all__ = [
    "DEFAULT_MAX_FRAME",
    "Connection",
    "ConnectionClosed",
    "FrameTooLarge",
    "FrameWriter",
    "LineFramer",
    "Message",
    "Notification",
    "RemoteError",
    "Request",
    "Response",
    "RpcError",
    "parse_frame",
]

_HOMES = {
    "Connection": "connection",
    "ConnectionClosed": "connection",
    "FrameWriter": "connection",
    "RemoteError": "errors",
    "RpcError": "errors",
    "DEFAULT_MAX_FRAME": "framing",
    "FrameTooLarge": "framing",
    "LineFramer": "framing",
    "Message": "messages",
    "Notification": "messages",
    "Request": "messages",
    "Response": "messages",
    "parse_frame": "messages",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{home}"), name)
