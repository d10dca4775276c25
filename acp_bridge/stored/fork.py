"""A new session from a prefix of another one (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..log.records import FORMAT_VERSION

__all__ = ["ForkError", "ended_turns", "fork_records"]

Record = dict[str, Any]


class ForkError(ValueError):
    pass


def ended_turns(records: Sequence[Mapping[str, Any]]) -> list[int]:
    """The turns of a log that have their ``turn/end``, in order."""
    return [r["turn"] for r in records if r.get("type") == "turn/end"]


def fork_records(
    records: Sequence[Mapping[str, Any]],
    *,
    session_id: str,
    cwd: str,
    upto_turn: int | None,
    at: float,
    additional_directories: list[str] | None = None,
) -> list[Record]:
    """The records of a fork: a new ``session/start`` naming its parent, then
    every record of turns 1 to ``upto_turn`` (default: the last turn that has
    ended), renumbered from ``seq`` 1.

    Each copied record keeps its fields (attempt and tool call ids stay unique
    in the new file, an interrupted message comes with the deltas it was built from), and
    a compaction's ``kept_from`` and ``pinned`` name the same records by their
    new ``seq``, so the fork's model history up to that turn is the parent's.
    Raises `ForkError` when ``upto_turn`` has not ended.
    """
    ended = ended_turns(records)
    if upto_turn is None:
        upto_turn = ended[-1] if ended else 0
    elif upto_turn not in ended:
        raise ForkError(f"turn {upto_turn} has not ended (ended turns: {_ranges(ended)})")
    start = next((r for r in records if r.get("type") == "session/start"), {})
    head: Record = {
        "v": FORMAT_VERSION,
        "seq": 0,
        "at": at,
        "type": "session/start",
        "turn": 0,
        "step": 0,
        "session_id": session_id,
        "cwd": cwd,
        "provider": start.get("provider"),
        "title": None,
        "parent": {"session_id": start.get("session_id"), "turn": upto_turn},
    }
    if additional_directories is not None:
        head["additional_directories"] = additional_directories
    for key in ("client_info", "client_capabilities"):
        if key in start:
            head[key] = start[key]
    out = [head]
    renumbered: dict[int, int] = {}  # old seq -> new seq
    for record in records:
        turn = record.get("turn")
        if record.get("type") == "session/start" or not isinstance(turn, int):
            continue
        if turn > upto_turn:
            break
        copy = dict(record)
        copy["seq"] = len(out)
        if type(record.get("seq")) is int:
            renumbered[record["seq"]] = copy["seq"]
        out.append(copy)
    for copy in out:
        if copy.get("type") == "compaction" and "kept_from" in copy:
            _renumber_compaction(copy, renumbered)
    return out


def _renumber_compaction(record: Record, renumbered: dict[int, int]) -> None:
    """Point a copied compaction's ``kept_from`` and ``pinned`` at the new seqs."""
    kept_from = record.get("kept_from")
    if type(kept_from) is int:
        later = [new for old, new in renumbered.items() if old >= kept_from]
        record["kept_from"] = min(later, default=record["seq"])
    pinned = record.get("pinned")
    if isinstance(pinned, list):
        record["pinned"] = [renumbered[s] for s in pinned if type(s) is int and s in renumbered]


def _ranges(turns: list[int]) -> str:
    if not turns:
        return "none"
    contiguous = turns == list(range(turns[0], turns[-1] + 1))
    return f"{turns[0]}-{turns[-1]}" if contiguous else str(turns)
