"""The durable event log: its record vocabulary, reader, projection and checkers.

`records` defines the vocabulary; `reader` reads a session file back
(through `upcast.load_log`, the one reader); `derive` projects the records
onto the model history and `projection` keeps that history up to date as a
log grows; `open_turn` is what an open turn looks like and how it closes
(shared by the live recorder, `reopen` and the checker); `check` states the
rules a log must satisfy and `history_rules` those of a history (used by
tests after every turn).

The names below load their module on first use: importing any part of the
log (the server does at start-up) does not load the checkers.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .records import FORMAT_VERSION, RECORD_TYPES, SURFACE_TYPES

if TYPE_CHECKING:
    from .check import HistoryInvalid, LogInvalid, check_history, check_log
    from .derive import delivered_prefix, derive_messages
    from .reader import (
        LogContents,
        LogCorrupt,
        iter_session_files,
        read_log,
        read_records,
        session_path,
        validate_session_id,
    )

_WHERE = {
    "HistoryInvalid": ".check",
    "LogInvalid": ".check",
    "check_history": ".check",
    "check_log": ".check",
    "delivered_prefix": ".derive",
    "derive_messages": ".derive",
    "LogContents": ".reader",
    "LogCorrupt": ".reader",
    "iter_session_files": ".reader",
    "read_log": ".reader",
    "read_records": ".reader",
    "session_path": ".reader",
    "validate_session_id": ".reader",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(where, __name__), name)


__all__ = [
    "FORMAT_VERSION",
    "RECORD_TYPES",
    "SURFACE_TYPES",
    "HistoryInvalid",
    "LogContents",
    "LogCorrupt",
    "LogInvalid",
    "check_history",
    "check_log",
    "delivered_prefix",
    "derive_messages",
    "iter_session_files",
    "read_log",
    "read_records",
    "session_path",
    "validate_session_id",
]
