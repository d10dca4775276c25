"""Reading a log for a ``session/load``: the text deltas folded into runs as they are read.

Most records of a long log are ``stream/delta`` records, and the replay needs
four things of each: its attempt, its turn, its part's kind and text.  Kept
as dicts until the replay, they were most of a long load's memory and of its
time (the dicts of a 100,000-record log are over 100 MB, and the replay
visited each).  `read_for_replay` reads and parses the file a slice of lines
at a time (the memory of one slice is reused by the next) and, of each
slice, keeps the other records as they are and folds each run of
consecutive one-part deltas of one attempt, turn and kind into a `DeltaRun`
of their texts.  The replay (`acp_bridge.log.replay`) turns a run into
exactly the chunks the deltas would have given, one per text, in order.

Each slice is parsed and checked as `acp_bridge.log.upcast.load_log` checks a
whole file on its fast path (today's version, ``seq`` contiguous from 0, a
known type); a file that needs more (a torn or bad line, an upcast, an
unknown type) makes it return None, and the caller reads it with `load_log`.
A delta of another shape (several parts, a text that is not a string, an
attempt that is not a string, a turn that is not an integer) stays a dict,
which the replay handles as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import orjson

from .records import FORMAT_VERSION
from .upcast import LoadedLog, gc_paused, record_types

__all__ = ["SLICE_BYTES", "DeltaRun", "read_for_replay"]

Record = dict[str, Any]

# About how many bytes of lines are read and parsed at once: big enough that
# a call costs nothing, small enough that a slice's dicts fit in the memory
# the previous slice's freed (fresh memory costs a page fault per page) and
# stay in the cache while they are checked and folded (a 100,000-record
# read took about a tenth less than with slices four times as big).
SLICE_BYTES: Final = 64 * 1024

DELTA: Final = "stream/delta"


@dataclass(slots=True)
class DeltaRun:
    """Consecutive ``stream/delta`` records of one ``attempt``, ``turn`` and
    part ``kind``, each of one part: their texts, in order."""

    attempt: str
    turn: int
    kind: str
    texts: list[str]


Item = Record | DeltaRun


def read_for_replay(path: str | os.PathLike[str]) -> tuple[LoadedLog, list[Item]] | None:
    """The log at ``path`` and its items in order: each record a dict, but
    the runs of deltas (`DeltaRun`).  The log's ``records`` are the dicts
    alone.  None if the file needs `load_log`."""
    with open(path, "rb") as file, gc_paused():
        return _read(_slices(file))


def _slices(file: BinaryIO) -> Iterator[bytes | None]:
    """The file's lines, read a slice of about `SLICE_BYTES` at a time: each
    slice the complete lines read so far, without the last one's newline;
    None last if the file does not end with a newline (a torn line).

    Read a slice at a time, not whole: a long log's file is megabytes of
    fresh memory (a page fault a page) when read at once, and a slice
    reuses the memory of the one before while it is still in the cache.
    """
    rest = b""
    while chunk := file.read(SLICE_BYTES):
        end = chunk.rfind(b"\n")
        if end < 0:
            rest += chunk
            continue
        yield rest + chunk[:end]
        rest = chunk[end + 1 :]
    if rest:
        yield None


def _read(slices: Iterable[bytes | None]) -> tuple[LoadedLog, list[Item]] | None:
    items: list[Item] = []
    records: list[Record] = []
    seq = 0
    size = 0
    run: DeltaRun | None = None
    for lines in slices:
        if not lines:
            return None  # a torn last line (None), or a blank line: load_log's to read
        try:
            values = orjson.loads(b"[" + lines.replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            return None  # a blank or bad line: load_log says which
        size += len(lines) + 1
        found = record_types(values, FORMAT_VERSION, seq)
        if found is None:
            return None
        seq += len(values)
        if DELTA not in found:
            items += values
            records += values
            run = None
            continue
        run = _fold(values, found, items, records, run)
        del values
    if not size:
        return None  # an empty file: load_log's to read
    return LoadedLog(records, seq, size, False), items


def _fold(
    values: list[Record],
    found: list[str],
    items: list[Item],
    records: list[Record],
    run: DeltaRun | None,
) -> DeltaRun | None:
    """Add a slice's records to ``items``, each run of one-part deltas of one
    attempt, turn and kind folded into a `DeltaRun` (a delta of another shape
    stays a dict), and the dicts to ``records``.  Returns the run the next
    slice may continue."""
    append, keep = items.append, records.append
    # The open run's key and texts (locals: this loop visits every delta).
    if run is None:
        attempt, turn, part_kind, texts = None, None, None, None
    else:
        attempt, turn, part_kind, texts = run.attempt, run.turn, run.kind, run.texts
    for value, kind in zip(values, found, strict=True):
        if kind == DELTA:
            try:  # subscripts, not calls of get: this loop visits every delta
                parts, this_attempt, this_turn = value["parts"], value["attempt"], value["turn"]
            except KeyError:
                parts = None
            if type(parts) is list and len(parts) == 1:
                part = parts[0]
                if type(part) is list and len(part) == 3 and type(part[2]) is str:
                    # Equal to the run's key: of its types too (a str equals
                    # only a str; an int turn a number of the same value, which
                    # the replay treats alike).
                    if (
                        texts is not None
                        and part[1] == part_kind
                        and this_attempt == attempt
                        and this_turn == turn
                    ):
                        texts.append(part[2])
                        continue
                    attempt, turn, part_kind = this_attempt, this_turn, part[1]
                    if type(attempt) is str and type(turn) is int and type(part_kind) is str:
                        run = DeltaRun(attempt, turn, part_kind, [part[2]])
                        texts = run.texts
                        append(run)
                        continue
        append(value)
        keep(value)
        run = texts = None
    return run
