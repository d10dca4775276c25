"""The records of a few types, picked by the types the read had, not by the records.

A loaded log's readers that look at a few record types (how each turn
ended, the last turn's number, the regenerates, the markers of stopped
replies, the plan, the mode, the cost) each made a pass over every record
but the deltas, reading a field of each dict: on a 100,000-record log,
28,000 dicts a pass, several milliseconds each.  A read of a whole file
has each record's type already (`acp_bridge.log.upcast.LoadedLog.kinds`),
so `of_types` picks the records of the types a reader needs in one pass in C
over those strings, and the reader gets a list of hundreds instead.

A reader given such a list must ignore every record of the other types (its
result is then the same): each type set is named after the reader it serves
and lives beside it, and a test holds every reader to its type set on
random logs.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, Final, Generic, TypeVar

__all__ = ["DELTA", "Typed", "of_types"]

R = TypeVar("R")
M = TypeVar("M", bound=Mapping[str, Any])

DELTA: Final = "stream/delta"


def of_types(records: Sequence[R], kinds: Sequence[str], types: Container[str]) -> list[R]:
    """The records whose type (``kinds``: the type of each of ``records``) is
    one of ``types``, in order."""
    if len(kinds) != len(records):
        raise ValueError("one type per record")
    # By their positions: `compress` of the records would touch each (its
    # reference count), and a long log's dicts are cold in the cache.
    picked = compress(range(len(kinds)), map(types.__contains__, kinds))
    return list(map(records.__getitem__, picked))


@dataclass(frozen=True, slots=True)
class Typed(Generic[M]):
    """Records, and the type of each when the read had them (else None)."""

    records: list[M]
    kinds: list[str] | None = None

    @classmethod
    def without_deltas(cls, records: list[M], kinds: list[str] | None) -> Typed[M]:
        """The records of ``records`` that are not ``stream/delta`` (with their types)."""
        if kinds is None:
            return cls([record for record in records if record.get("type") != DELTA])
        if DELTA not in kinds:  # the usual read for a replay: its deltas are runs
            return cls(records, kinds)
        keep = list(map(DELTA.__ne__, kinds))
        return cls(list(compress(records, keep)), list(compress(kinds, keep)))

    def of_types(self, types: Container[str]) -> list[M]:
        """The records of ``types``, in order (`of_types`)."""
        if self.kinds is None:
            return [record for record in self.records if record.get("type") in types]
        return of_types(self.records, self.kinds, types)
