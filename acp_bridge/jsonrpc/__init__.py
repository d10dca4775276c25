"""JSON-RPC 2.0 over newline-delimited JSON: framing, messages, errors, a connection."""

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
