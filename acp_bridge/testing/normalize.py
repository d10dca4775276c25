"""Stable placeholders for what changes from run to run: ids, times, paths.

`normalize` is what makes a whole-session snapshot comparable between runs:
the ids acp-bridge makes (``sess_...``, ``msg_...``, ``att_...``) become
``<sess-1>``, ``<msg-1>``, ... numbered in order of appearance, the times of
event-log records become 0, and the paths you name become placeholders.
`coalesce_deltas` merges the stream deltas of an event log, whose batching
depends on timing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

Json = dict[str, Any]

ID_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"sess_[0-9a-f]{32}"), "sess"),
    (re.compile(r"msg_[0-9a-f]{16}"), "msg"),
    (re.compile(r"att_[0-9a-f]{16}"), "att"),
)
"""The ids acp-bridge makes, and the prefix of their placeholders."""

TIME_KEYS: frozenset[str] = frozenset({"at", "created_at"})
"""Keys whose number is a time (event-log records): replaced by 0."""


def normalize(
    value: Any,
    *,
    paths: Mapping[str, str] | None = None,
    ids: Iterable[tuple[re.Pattern[str], str]] = ID_PATTERNS,
    times: frozenset[str] = TIME_KEYS,
    stamps: frozenset[str] = frozenset(),
) -> Any:
    """A copy of ``value`` with stable placeholders for ids, times and paths.

    Every string is searched for each pattern of ``ids``; each distinct match
    becomes ``<prefix-N>``, numbered in order of appearance.  Each key of
    ``paths`` found in a string is replaced by its value (in the order given).
    A number under a key of ``times`` becomes 0, a string under a key of
    ``stamps`` (an ISO time, a duration) becomes ``"<time>"``, and the times of
    an interrupted message's ``stream`` (``[t_ms, index, kind, text]``) become 0.
    """
    seen: dict[str, str] = {}
    counters: dict[str, int] = {}
    patterns = list(ids)
    replacements = dict(paths or {})

    def fix_str(s: str) -> str:
        for pattern, prefix in patterns:

            def repl(m: re.Match[str], prefix: str = prefix) -> str:
                if m.group(0) not in seen:
                    counters[prefix] = counters.get(prefix, 0) + 1
                    seen[m.group(0)] = f"<{prefix}-{counters[prefix]}>"
                return seen[m.group(0)]

            s = pattern.sub(repl, s)
        for real, placeholder in replacements.items():
            s = s.replace(real, placeholder)
        return s

    def walk(v: Any, key: str | None = None) -> Any:
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return "<time>" if key in stamps else fix_str(v)
        if key in times and isinstance(v, int | float) and not isinstance(v, bool):
            return 0
        return v

    return walk(value)


def coalesce_deltas(records: list[Json]) -> list[Json]:
    """An event log with consecutive ``stream/delta`` records of one attempt merged
    (their batching depends on timing) and ``seq`` renumbered: stable for snapshots."""
    out: list[Json] = []
    for rec in records:
        if (
            rec["type"] == "stream/delta"
            and out
            and out[-1]["type"] == "stream/delta"
            and out[-1]["attempt"] == rec["attempt"]
        ):
            merged = dict(out[-1])
            parts = [list(p) for p in merged["parts"]]
            for index, kind, text in rec["parts"]:
                if parts and parts[-1][0] == index and parts[-1][1] == kind:
                    parts[-1][2] += text
                else:
                    parts.append([index, kind, text])
            merged["parts"] = parts
            out[-1] = merged
        else:
            out.append(rec)
    for i, rec in enumerate(out):
        rec = dict(rec)
        rec["seq"] = i
        out[i] = rec
    return out


__all__ = ["ID_PATTERNS", "TIME_KEYS", "coalesce_deltas", "normalize"]
