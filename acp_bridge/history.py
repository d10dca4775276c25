"""``acp-bridge history SESSION_ID``: what the model will see next.

A damaged log is reported as ``file:line: field: reason`` with status 1,
never with a traceback: the records are validated against their models
(`acp_bridge.log.reader.read_valid_records`) before the history is derived.
"""

from __future__ import annotations

import logging
import sys

import orjson

from .log.derive import derive_messages
from .log.reader import LogCorrupt, read_valid_records, session_path

log = logging.getLogger("acp_bridge.history")


def print_history(state_dir: str, session_id: str) -> int:
    try:
        path = session_path(state_dir, session_id)
    except ValueError as exc:
        sys.stderr.write(f"acp-bridge: {_short(str(exc))}\n")
        return 2
    try:
        records = read_valid_records(path, warn=_warn)
    except FileNotFoundError:
        sys.stderr.write(f"acp-bridge: no session {session_id!r} in {state_dir}\n")
        return 1
    except LogCorrupt as exc:
        sys.stderr.write(f"acp-bridge: corrupt session log: {_short(str(exc), 2000)}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"acp-bridge: cannot read {path}: {exc.strerror or exc}\n")
        return 1
    try:
        messages = derive_messages(records)
    except Exception as exc:  # a record shape the models let through: still no traceback
        log.debug("deriving the history of %s failed", path, exc_info=True)
        sys.stderr.write(
            f"acp-bridge: cannot derive a history from {path}: {type(exc).__name__}: "
            f"{_short(str(exc))}\n"
        )
        return 1
    sys.stdout.buffer.write(orjson.dumps(messages, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def _warn(text: str) -> None:
    sys.stderr.write(f"acp-bridge: {text}\n")


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
