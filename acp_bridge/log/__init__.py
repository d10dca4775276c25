"""The durable event log: its record vocabulary, reader, projection and checkers.

`records` defines the vocabulary; `reader` reads a session file back;
`derive` projects the records onto the model history; `check` states the
rules a history and a log must satisfy (used by tests after every turn).
"""

from __future__ import annotations

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
from .records import FORMAT_VERSION, RECORD_TYPES, SURFACE_TYPES

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
