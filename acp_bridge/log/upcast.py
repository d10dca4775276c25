"""Reading a log written by any version of acp-bridge.

Every record carries its format version ``v``.  `UPCASTERS` maps a version n
to the function that turns a record of version n into one of version n + 1;
`upcast` applies them in turn until the record is of the current version
(`acp_bridge.log.records.FORMAT_VERSION`).  A record of a version newer than
this program, or of an older one that no upcaster covers, makes the log
unreadable (`LogCorrupt`): guessing would change what the model sees.

`load_log` is the one reader of a log file: a torn final line is cut off,
any other bad line is an error, ``seq`` must be contiguous, every record is
upcast, and records of a type this version does not know are skipped with a
warning on stderr: a log written by a newer version that only added record
types still loads, and the ``seq`` of the skipped records still counts when
the log is continued.  `acp_bridge.log.reader.read_records` sits on top of it
(``keep_unknown=True``: it returns such records too).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final

import orjson

from .errors import LogCorrupt, json_kind
from .records import FORMAT_VERSION, RECORD_TYPES

__all__ = ["UPCASTERS", "LoadedLog", "gc_paused", "load_log", "pause_gc", "record_types", "upcast"]

log = logging.getLogger("acp_bridge.log")

Record = dict[str, Any]

# version n -> a function from a record of version n to one of version n + 1.
# Format version 1 is the first: nothing to upcast yet.  When version 2 comes,
# add ``1: _v1_to_v2`` here; tests/fixtures/log-v1.jsonl (a log of version 1
# as this program writes it) must keep loading to the same history.
UPCASTERS: dict[int, Callable[[Record], Record]] = {}


def upcast(record: Record, current: int | None = None) -> Record:
    """``record`` raised to the current format version; `ValueError` if it cannot be."""
    target = FORMAT_VERSION if current is None else current
    version = record.get("v")
    if type(version) is not int:
        raise ValueError(f"unknown format version {version!r}")
    if version > target:
        raise ValueError(f"unknown format version {version}: newer than this acp-bridge ({target})")
    while version < target:
        step = UPCASTERS.get(version)
        if step is None:
            raise ValueError(f"no upcaster for format version {version}")
        record = step(record)
        new_version = record.get("v")
        if type(new_version) is not int or new_version != version + 1:
            raise ValueError(f"the upcaster of version {version} returned version {new_version!r}")
        version = new_version
    return record


@dataclass(slots=True)
class LoadedLog:
    """A log as this version understands it.

    ``records``: the known records, upcast, in order (``seq`` may have gaps
    where unknown records were skipped); ``next_seq``: the ``seq`` the next
    appended record must have; ``valid_size``: the byte length of the complete
    lines (a torn tail beyond it must be cut before appending); ``torn``:
    whether there was such a tail.
    """

    records: list[Record]
    next_seq: int
    valid_size: int
    torn: bool


_VERSION = itemgetter("v")
_SEQ = itemgetter("seq")
_TYPE = itemgetter("type")


def record_types(values: Any, current: int, first: int = 0) -> list[str] | None:
    """The type of each of ``values``, if they are records of version ``current``
    numbered from ``first`` on, of known types; None if any needs more than a
    glance.

    Each check is one pass in C over the records (`map` of an `itemgetter`,
    a `set` of the types), not a Python loop: on a long log the loop cost
    about as much as the parsing.  ``values`` are JSON data (what orjson
    parsed): of those, only a dict answers to a string key, so the fields'
    reads check that each value is a dict, without a pass of their own.
    """
    if type(values) is not list:
        return None
    try:
        versions = list(map(_VERSION, values))
        seqs = list(map(_SEQ, values))
        # A type that is not a known one is no key of _KNOWN (a type that
        # is not a string is none, and a list or an object is not hashable).
        kinds = list(map(_KNOWN.__getitem__, map(_TYPE, values)))
    except (KeyError, TypeError):  # not a dict, a field missing, an unknown type
        return None
    # ``==`` alone would take True for 1 and 1.0 for 1: the types are checked too.
    if versions.count(current) != len(values) or not set(map(type, versions)) <= {int}:
        return None
    if seqs != list(range(first, first + len(values))) or not set(map(type, seqs)) <= {int}:
        return None
    return kinds


# Each known type to itself: the one string of each type (`record_types`).
_KNOWN: Final = {kind: kind for kind in RECORD_TYPES}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a long log creates hundreds
    of thousands of containers, and the collections they trigger would cost
    more than the parsing (JSON data holds no reference cycles)."""
    resume = pause_gc()
    try:
        yield
    finally:
        resume()


_pauses = 0
_resume_enabled = False
# Pauses are taken on the event loop and in worker threads (a session's
# records read back, `acp_bridge.log.writer`): the count is kept under a lock.
_pause_lock = threading.Lock()


def pause_gc() -> Callable[[], None]:
    """Pause the cyclic garbage collector until the returned function is called
    (once).  Pauses nest, across tasks and threads too: the collector runs
    again, if it ran before the first, when the last pause ends."""
    global _pauses, _resume_enabled
    with _pause_lock:
        if _pauses == 0:
            _resume_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    done = False

    def resume() -> None:
        global _pauses
        nonlocal done
        with _pause_lock:
            if done:
                return
            done = True
            _pauses -= 1
            if _pauses == 0 and _resume_enabled:
                gc.enable()

    return resume


def load_log(
    path: str | os.PathLike[str], *, current: int | None = None, keep_unknown: bool = False
) -> LoadedLog:
    """Read, validate and upcast a session log (see the module docstring);
    ``keep_unknown``: keep records of unknown types instead of skipping them."""
    with gc_paused():
        return _load_log(path, FORMAT_VERSION if current is None else current, keep_unknown)


def _read_as_array(path: str | os.PathLike[str]) -> tuple[bytearray, int]:
    """The file's bytes after a ``[`` (the start of the JSON array of its
    lines, `_load_log`), and their length.

    Read straight into one buffer: on a long log each copy of the file is
    megabytes of fresh memory, and its first touch costs more than the copy.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        buffer = bytearray(size + 2)  # a byte more than the file: a file that grew shows
        length = file.readinto(memoryview(buffer)[1:])
        if length == size + 1:  # it may have: read the rest
            more = file.read()
            buffer += more
            length += len(more)
    del buffer[length + 1 :]
    buffer[0] = 0x5B  # [
    return buffer, length


def _load_log(path: str | os.PathLike[str], current: int, keep_unknown: bool) -> LoadedLog:
    buffer, length = _read_as_array(path)
    if buffer.endswith(b"\n"):
        # The usual case, a file of complete lines: parse them in one call
        # (a blank line makes the array invalid), then check the records; any
        # problem takes the line-by-line path.
        buffer[-1] = 0x5D  # ]
        try:
            values = orjson.loads(buffer.replace(b"\n", b","))
        except orjson.JSONDecodeError:
            pass
        else:
            # Records that need more than a glance (an upcast, an unknown
            # type, a bad ``seq``) take the line-by-line path, which names the line.
            if record_types(values, current) is not None:
                return LoadedLog(values, len(values), length, False)
            del values
        buffer[-1] = 0x0A  # \n
    data = bytes(memoryview(buffer)[1:])
    del buffer
    lines = data.split(b"\n")
    tail = lines.pop()
    records: list[Record] = []
    seq = 0
    valid_size = 0
    for line_no, line in enumerate(lines, start=1):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if line_no == len(lines) and not tail:
                return LoadedLog(records, seq, valid_size, True)
            raise LogCorrupt(path, line_no, f"not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            kind = json_kind(value)
            raise LogCorrupt(path, line_no, f"a record must be a JSON object, not {kind}")
        if value.get("v") != current or type(value.get("v")) is not int:
            try:
                value = upcast(value, current)
            except ValueError as exc:
                raise LogCorrupt(path, line_no, str(exc)) from None
        if type(value.get("seq")) is not int or value["seq"] != seq:
            raise LogCorrupt(path, line_no, f"seq is {value.get('seq')!r}, expected {seq}")
        kind = value.get("type")
        if not isinstance(kind, str):
            raise LogCorrupt(path, line_no, "the record has no string 'type'")
        seq += 1
        valid_size += len(line) + 1
        if kind not in RECORD_TYPES and not keep_unknown:
            log.warning("%s:%d: skipping a record of unknown type %r", path, line_no, kind)
            continue
        records.append(value)
    return LoadedLog(records, seq, valid_size, bool(tail))
