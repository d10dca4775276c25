"""The records a session keeps of its log in memory, and their pack.

`MODEL_TYPES` are the records `derive_messages` reads (``turn/start`` says
which turn a regenerate replaces).  Only these are kept in memory; the rest
(stream frames, attempts, settings) lives in the file alone.  The projection
of this subset equals the projection of the whole log, because
derive_messages ignores every other type.

A session loaded and left idle keeps them as one JSON array (the pack,
`acp_bridge.log.writer.SessionLog.restore`); a read of the log makes it a
slice at a time (`model_pack`, `join_packs`) while each slice is fresh.
Both the writer and the log's reader (`acp_bridge.log.replay_read`) use this
module, which uses neither.
"""

from __future__ import annotations

from itertools import compress
from typing import Any, Final

import orjson

from .records import SURFACE_TYPES

__all__ = ["MODEL_TYPES", "for_history", "join_packs", "model_pack"]

MODEL_TYPES: Final = SURFACE_TYPES | {"turn/start", "turn/end", "compaction"}


def model_pack(records: list[dict[str, Any]], kinds: list[str]) -> bytes:
    """The elements of the JSON array that `SessionLog.restore` keeps of
    ``records`` (``kinds``: the type of each), without the brackets: the packs
    of consecutive slices of a log, joined with commas between brackets, are
    the pack of the whole (`join_packs`)."""
    model = list(compress(records, map(MODEL_TYPES.__contains__, kinds)))
    return orjson.dumps([for_history(record) for record in model])[1:-1]


def join_packs(packs: list[bytes]) -> bytes:
    """The JSON array of the `model_pack` s of consecutive slices of a log."""
    return b"[" + b",".join([pack for pack in packs if pack]) + b"]"


def for_history(record: dict[str, Any]) -> dict[str, Any]:
    """The record without the timed stream an interrupted message embeds."""
    if "stream" not in record:
        return record
    return {key: value for key, value in record.items() if key != "stream"}
