"""An agent process's wire on disk: the checker holds no frame it does not need.

An agent that streams as fast as it can writes a million frames in a few
seconds, and a chunk can be a megabyte: held as Python objects they took
gigabytes.  `Spool` is the test kit client's ``transcript``, ``times`` and
``messages`` for the checker (`Spool.adopt` swaps them in): each entry is
appended to a file as one JSON line as it arrives, and only its offset and
time stay in memory (16 bytes a frame, 24 for a received one).  Reading an
entry back reads its line; the last few entries (up to `RECENT_BYTES`) are
kept as they were, so the kit's turns, which look at each message right after
it arrives, rarely touch the disk.  Responses are few and searched for by the
scenarios (`Spool.position`): their positions are kept too.
"""

from __future__ import annotations

import os
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import orjson

from ..client import AcpClient, is_response
from ..testing.session import turn_end

Json = dict[str, Any]
Entry = tuple[str, Json]

RECENT_BYTES = 4 << 20
"""Entries kept in memory as they were, newest first, up to this many bytes of JSON."""


class Spool(Sequence[Entry]):
    """A process's transcript, ``(direction, message)`` in wire order, on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("w+b")
        self._fd = self._file.fileno()
        self._offsets = array("q")
        self._end = 0
        self._flushed = 0
        self._recent: dict[int, Entry] = {}
        self._recent_order: deque[tuple[int, int]] = deque()
        self._recent_bytes = 0
        self._responses: list[int] = []
        self.times = array("d")
        """When each entry was made (``time.monotonic()``), index for index."""
        self.messages = Received(self)
        """The received messages only, as the client's ``messages``."""

    def adopt(self, client: AcpClient) -> None:
        """Become ``client``'s records: what it holds so far moves here, and from
        now on it appends here.  Its list of updates is dropped (the checker
        reads updates from the messages)."""
        received = {id(m) for m in client.messages}
        for (direction, msg), at in zip(client.transcript, client.times, strict=True):
            self.append((direction, msg), at=at)
            if direction == "recv" and id(msg) in received:
                self.messages.note()
        client.transcript = self  # type: ignore[assignment]
        client.times = self.times  # type: ignore[assignment]
        client.messages = self.messages  # type: ignore[assignment]
        client.updates = _Dropped()

    # -- writing ---------------------------------------------------------------------

    def append(self, entry: Entry, *, at: float | None = None) -> None:
        if self._file.closed:
            return  # what the agent wrote while the checker ended it: not kept
        line = orjson.dumps(entry) + b"\n"
        index = len(self._offsets)
        self._file.write(line)  # first: a failed write leaves no entry without its line
        self._offsets.append(self._end)
        self._end += len(line)
        if at is not None:
            self.times.append(at)
        if entry[0] == "recv" and (is_response(entry[1]) or _ends_a_turn(entry[1])):
            self._responses.append(index)
        self._remember(index, entry, len(line))

    def _remember(self, index: int, entry: Entry, size: int) -> None:
        if size > RECENT_BYTES:
            return
        self._recent[index] = entry
        self._recent_order.append((index, size))
        self._recent_bytes += size
        while self._recent_bytes > RECENT_BYTES:
            old, old_size = self._recent_order.popleft()
            self._recent.pop(old, None)
            self._recent_bytes -= old_size

    @property
    def sealed(self) -> bool:
        return self._file.closed

    def seal(self) -> None:
        """The process has ended: close the file (reading opens it again)."""
        if not self._file.closed:
            self._file.close()

    # -- reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("spool index out of range")
        return self._read(index)

    def __iter__(self) -> Iterator[Entry]:
        if not self._file.closed:
            for i in range(len(self)):
                yield self._read(i)
            return
        with self.path.open("rb") as f:
            for _ in range(len(self)):
                direction, msg = orjson.loads(f.readline())
                yield direction, msg

    def _read(self, index: int) -> Entry:
        found = self._recent.get(index)
        if found is not None:
            return found
        start = self._offsets[index]
        stop = self._offsets[index + 1] if index + 1 < len(self._offsets) else self._end
        if self._file.closed:
            with self.path.open("rb") as f:
                f.seek(start)
                line = f.read(stop - start)
        else:
            if self._flushed < self._end:
                self._file.flush()
                self._flushed = self._end
            line = os.pread(self._fd, stop - start, start)
        direction, msg = orjson.loads(line)
        return direction, msg

    def position(self, msg: Json) -> int | None:
        """The index of ``msg``, a received response or an ACP v2 idle state_update
        (what ends a v2 turn; the very object, or an equal one), the latest if
        several; None if it is not one."""
        for index in reversed(self._responses):
            _, found = self._read(index)
            if found is msg or found == msg:
                return index
        return None


class Received(Sequence[Json]):
    """The received messages of a `Spool`, as the client's ``messages`` list."""

    def __init__(self, spool: Spool) -> None:
        self._spool = spool
        self._at = array("q")

    def note(self) -> None:
        """The spool's last entry is a received message."""
        self._at.append(len(self._spool) - 1)

    def append(self, msg: Json) -> None:
        # The client records a message in the transcript just before it appends
        # it here: it is the spool's last entry (unless the spool is sealed).
        if not self._spool.sealed:
            self.note()

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, index: int) -> Json: ...

    @overload
    def __getitem__(self, index: slice) -> list[Json]: ...

    def __getitem__(self, index: int | slice) -> Json | list[Json]:
        if isinstance(index, slice):
            return [self._spool[self._at[i]][1] for i in range(*index.indices(len(self)))]
        return self._spool[self._at[index]][1]

    def __iter__(self) -> Iterator[Json]:
        for at in self._at:
            yield self._spool[at][1]


class _Dropped(list[Json]):
    """A list that keeps nothing appended to it."""

    def append(self, item: Json) -> None:
        pass


__all__ = ["RECENT_BYTES", "Received", "Spool"]


def _ends_a_turn(msg: Json) -> bool:
    """An ACP v2 idle ``state_update`` (`turn_end`, of whichever session):
    what ends a v2 turn, found like a response."""
    params = msg.get("params")
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    return isinstance(session_id, str) and turn_end(msg, session_id) is not None
