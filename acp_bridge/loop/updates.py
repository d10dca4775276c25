"""Serialized ``session/update`` frames for one session, built from byte templates.

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
# A stand-in message id, likewise (its JSON is an escape no id holds).
_ID_CUT = "\x01"
_ID_CUT_JSON = orjson.dumps(_ID_CUT)
_UNSET: Any = object()


class UpdateFrames:
    __slots__ = ("_around_id", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        # Per chunk kind, the prefix cut where its message id goes (None: the
        # id stand-in is not unique in the frame, so each prefix is built).
        self._around_id: dict[str, tuple[bytes, bytes] | None] = {}

    def chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """Prefix of an ``agent_message_chunk``/``agent_thought_chunk`` text frame:
        the frame of `text_chunk` cut where its text goes (so the template has
        the builder's shape; made once per stream, not per chunk).

        Each stream has its own message id, and only the id changes: the
        prefix is built once per kind with a stand-in id, cut there, and
        each stream's prefix is its two parts around the id's JSON (the
        same bytes as `build_chunk_prefix`, which a test holds it to).
        """
        around = self._around_id.get(kind, _UNSET)
        if around is _UNSET:
            template = self.build_chunk_prefix(kind, _ID_CUT)
            parts = template.split(_ID_CUT_JSON)
            around = (parts[0], parts[1]) if len(parts) == 2 else None
            self._around_id[kind] = around
        if around is None:
            return self.build_chunk_prefix(kind, message_id)
        return b"".join((around[0], orjson.dumps(message_id), around[1]))

    def build_chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """`chunk_prefix` built from `text_chunk` (the reference)."""
        frame = self.update(text_chunk(kind, _CUT, message_id=message_id))
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
