"""How deeply a JSON value may nest: one limit for what is read and what is written.

orjson reads values nested up to 1,024 levels but writes only 254 (`ENCODE_DEPTH`):
a deeper value read from the editor would fail to encode in the log record that
keeps it, after the record's sequence number was taken.  So a frame read is held
to `MAX_DEPTH` levels, counted from the frame itself: a value of it, embedded in
a record or a frame the bridge writes (a few levels of envelope), always encodes.
"""

from __future__ import annotations

from typing import Any, Final

# What orjson writes: a value nested deeper fails to encode.
ENCODE_DEPTH: Final = 254
# What the bridge reads, counted from the frame (an object is one level).
MAX_DEPTH: Final = 128


def too_deep(value: Any, limit: int) -> list[str | int] | None:
    """The path to the first array or object nested more than ``limit`` levels
    below ``value`` itself (its members are level 1), or None.  Iterative: a
    value 1,000 levels deep needs no Python recursion."""
    stack: list[tuple[Any, int, list[str | int]]] = [(value, 0, [])]
    while stack:
        item, level, path = stack.pop()
        items = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in items:
            if isinstance(child, dict | list):
                if level + 1 > limit:
                    return [*path, key]
                stack.append((child, level + 1, [*path, key]))
    return None


def field_name(path: list[str | int], shown: int = 4) -> str:
    """``prompt[0]._meta.a…``: the path's first ``shown`` parts."""
    text = ""
    for part in path[:shown]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text + ("…" if len(path) > shown else "")
