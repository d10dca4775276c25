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
# Stand-ins for a session id and a message id in the template of a chunk's
# prefix (`_prefix_parts`): their JSON is an escape, found once in the template.
_SID_CUT = "\x02"
_SID_CUT_JSON = orjson.dumps(_SID_CUT)
_ID_CUT = "\x01"
_ID_CUT_JSON = orjson.dumps(_ID_CUT)
# Per chunk kind, the prefix's constant parts around the session id and the
# message id: shared by every session (an idle session keeps none of it).
_PREFIX_PARTS: dict[str, tuple[bytes, bytes, bytes]] = {}


class UpdateFrames:
    __slots__ = ("session_id",)

    chunk_suffix = _SUFFIX

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """Prefix of an ``agent_message_chunk``/``agent_thought_chunk`` text frame:
        the frame of `text_chunk` cut where its text goes (so the template has
        the builder's shape; made once per stream, not per chunk).

        Only the session id and the message id differ from one stream to the
        next: the prefix is the constant parts of its kind (`_prefix_parts`)
        around their JSON, the same bytes as `build_chunk_prefix`, which a
        test holds it to.
        """
        parts = _PREFIX_PARTS.get(kind)
        if parts is None:
            parts = _PREFIX_PARTS[kind] = _prefix_parts(kind)
        before, between, after = parts
        return b"".join(
            (before, orjson.dumps(self.session_id), between, orjson.dumps(message_id), after)
        )

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


def _prefix_parts(kind: str) -> tuple[bytes, bytes, bytes]:
    """The constant parts of a ``kind`` chunk's prefix: before the session id,
    between it and the message id, after the message id (each stand-in is
    in the template once: nothing else in it is an id)."""
    template = UpdateFrames(_SID_CUT).build_chunk_prefix(kind, _ID_CUT)
    before, rest = template.split(_SID_CUT_JSON)
    between, after = rest.split(_ID_CUT_JSON)
    return before, between, after


CHUNK_SUFFIX = _SUFFIX
