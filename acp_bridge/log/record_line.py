"""One record of a session log and its line in the file, free of I/O.

`acp_bridge.log.writer.SessionLog` builds every record it appends here, and
so does the start-up's front door (`acp_bridge.front_door`) for the
``session/start`` record of a session it opens before the server is
imported: the two write the same bytes for the same fields.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson

from .records import FORMAT_VERSION

__all__ = ["encode_record", "new_record"]


_now = time.time
_dumps = orjson.dumps
# The line's newline is written by the encoder: no second copy of the line
# to add it (a record is encoded once, on the append's path).
_LINE: Final = orjson.OPT_APPEND_NEWLINE


def new_record(seq: int, type: str, turn: int, step: int, fields: dict[str, Any]) -> dict[str, Any]:
    """The record ``seq`` of a log: the common head (now as its time), then ``fields``."""
    return {
        "v": FORMAT_VERSION,
        "seq": seq,
        "at": _now(),
        "type": type,
        "turn": turn,
        "step": step,
        **fields,
    }


def encode_record(record: dict[str, Any]) -> bytes:
    """The record's line in the file."""
    return _dumps(record, option=_LINE)
