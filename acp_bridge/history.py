"""``acp-bridge history SESSION_ID``: what the model will see next.

The messages printed are those a model request carries
(`acp_bridge.providers.sent.sent_messages` of the derived history), the
function both real providers build their requests from, so the two cannot
disagree: no message the request lacks, the note after a reply cut short.

A damaged log is reported as ``file:line: field: reason`` with status 1,
never with a traceback: the records are validated against their models
(`acp_bridge.log.reader.validate_records`) before the history is derived.
"""

from __future__ import annotations

import logging
import sys

import orjson

from .log.derive import derive_messages
from .log.reader import LogCorrupt, validate_records
from .log.upcast import load_log
from .providers.sent import sent_messages
from .sessions_cli import resolve

log = logging.getLogger("acp_bridge.history")


def print_history(state_dir: str, session_id: str) -> int:
    path = resolve(state_dir, session_id)  # a wrong id: the nearest ones on stderr
    if isinstance(path, int):
        return path
    try:
        # Upcast to today's format (a torn last line is cut), then check
        # every record's shape before deriving from it.
        records = validate_records(load_log(path).records, path, warn=_warn)
    except LogCorrupt as exc:
        sys.stderr.write(f"acp-bridge: corrupt session log: {_short(str(exc), 2000)}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"acp-bridge: cannot read {path}: {exc.strerror or exc}\n")
        return 1
    try:
        messages = sent_messages(derive_messages(records))
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
