"""Serialized ``session/update`` frames for one session, built from byte templates
(v1's `acp_bridge.loop.output.SessionFrames`).

Chunks are the hot path: a frame is a fixed prefix, the JSON-encoded text and
a fixed suffix, so each chunk costs one ``orjson.dumps`` of a string.  The
update itself is built by `acp_bridge.update_builders`, like every other.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..update_builders import text_chunk

_SUFFIX = b"}}}}\n"
# A stand-in text (ids never hold its JSON): marks where a chunk's text goes.
_CUT = "\x00"
_CUT_JSON = orjson.dumps(_CUT)


class UpdateFrames:
    __slots__ = ("session_id",)

    chunk_suffix = _SUFFIX

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """Prefix of an ``agent_message_chunk``/``agent_thought_chunk`` text frame:
        the frame of `text_chunk` cut where its text goes (so the template has
        the builder's shape; made once per stream, not per chunk).  v1's
        frame in both dialects: a chunk with its ``messageId`` is the same."""
        frame = UpdateFrames.update(self, text_chunk(kind, _CUT, message_id=message_id))
        prefix, suffix = frame.split(_CUT_JSON)
        assert suffix == _SUFFIX, suffix
        return prefix

    def update(self, update: dict[str, Any]) -> bytes:
        return orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": self.session_id, "update": update},
            },
            option=orjson.OPT_APPEND_NEWLINE,  # no copy of the frame to add it
        )


CHUNK_SUFFIX = _SUFFIX
