"""The records a session keeps of its log in memory.

`MODEL_TYPES` are the records `derive_messages` reads (``turn/start`` says
which turn a regenerate replaces).  Only these are kept in memory; the rest
(stream frames, attempts, settings) lives in the file alone.  The projection
of this subset equals the projection of the whole log, because
derive_messages ignores every other type.
"""

from __future__ import annotations

from typing import Any, Final

from .records import SURFACE_TYPES

__all__ = ["MODEL_TYPES", "for_history"]

MODEL_TYPES: Final = SURFACE_TYPES | {"turn/start", "turn/end", "compaction"}


def for_history(record: dict[str, Any]) -> dict[str, Any]:
    """The record without the timed stream an interrupted message embeds."""
    if "stream" not in record:
        return record
    return {key: value for key, value in record.items() if key != "stream"}
