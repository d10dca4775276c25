"""Serialized ``session/update`` frames for one session, built from byte templates.

Chunks are the hot path: a frame is a fixed prefix, the JSON-encoded text and
a fixed suffix, so each chunk costs one ``orjson.dumps`` of a string.
"""

from __future__ import annotations

from typing import Any

import orjson

_SUFFIX = b"}}}}\n"


class UpdateFrames:
    __slots__ = ("_head", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._head = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
            + orjson.dumps(session_id)
            + b',"update":{"sessionUpdate":"'
        )

    def chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """Prefix of an ``agent_message_chunk``/``agent_thought_chunk`` text frame."""
        return (
            self._head
            + kind.encode()
            + b'","messageId":'
            + orjson.dumps(message_id)
            + b',"content":{"type":"text","text":'
        )

    def update(self, update: dict[str, Any]) -> bytes:
        return (
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": self.session_id, "update": update},
                }
            )
            + b"\n"
        )


CHUNK_SUFFIX = _SUFFIX
