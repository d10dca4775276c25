"""``acp-bridge history SESSION_ID``: what the model will see next."""

from __future__ import annotations

import sys

import orjson

from .log.derive import derive_messages
from .log.reader import LogCorrupt, read_records, session_path


def print_history(state_dir: str, session_id: str) -> int:
    try:
        path = session_path(state_dir, session_id)
    except ValueError as exc:
        sys.stderr.write(f"acp-bridge: {exc}\n")
        return 2
    try:
        records = read_records(path)
    except FileNotFoundError:
        sys.stderr.write(f"acp-bridge: no session {session_id!r} in {state_dir}\n")
        return 1
    except LogCorrupt as exc:
        sys.stderr.write(f"acp-bridge: {exc}\n")
        return 1
    messages = derive_messages(records)
    sys.stdout.buffer.write(orjson.dumps(messages, option=orjson.OPT_INDENT_2) + b"\n")
    return 0
