"""``acp-bridge history SESSION_ID``: what the model will see next."""

from __future__ import annotations

import sys

import orjson

from .log.derive import derive_messages
from .log.reader import LogCorrupt
from .log.upcast import load_log
from .sessions_cli import resolve


def print_history(state_dir: str, session_id: str) -> int:
    path = resolve(state_dir, session_id)  # a wrong id: the nearest ones on stderr
    if isinstance(path, int):
        return path
    try:
        records = load_log(path).records
    except LogCorrupt as exc:
        sys.stderr.write(f"acp-bridge: {exc}\n")
        return 1
    messages = derive_messages(records)
    sys.stdout.buffer.write(orjson.dumps(messages, option=orjson.OPT_INDENT_2) + b"\n")
    return 0
