"""JSON-RPC 2.0 over newline-delimited JSON: framing, messages, errors, dispatch."""

from .errors import RpcError
from .framing import DEFAULT_MAX_FRAME, FrameTooLarge, LineFramer
from .messages import Message, Notification, Request, Response, parse_frame

__all__ = [
    "DEFAULT_MAX_FRAME",
    "FrameTooLarge",
    "LineFramer",
    "Message",
    "Notification",
    "Request",
    "Response",
    "RpcError",
    "parse_frame",
]
