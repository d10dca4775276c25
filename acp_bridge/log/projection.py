"""The model history of a growing log, kept up to date as records are appended.

`HistoryProjection` equals `acp_bridge.log.derive.derive_messages` of the
records fed so far (the pure function is the reference, and a property test
compares them after every record); `HistoryView` is the read-only view of it
a provider request gets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final, TypeVar, cast, overload

from .derive import (
    TEXT_TYPES,
    Surface,
    apply_compaction,
    compacted_records,
    completed_compaction,
    has_tool_blocks,
    is_clear,
    leaves_out,
    live_records,
    note_regenerate,
    pinned_seqs,
    settle,
    surface_message,
)
from .records import SURFACE_TYPES

__all__ = ["HistoryProjection", "HistoryView"]

Message = dict[str, Any]

_NONE: Final[frozenset[Any]] = frozenset()
T = TypeVar("T")


class HistoryProjection:
    """``derive_messages(records)`` for a growing log, at a cost that does not grow with it.

    The log stays the source of truth: `records` is the list of the records
    fed so far, and `messages()` always equals ``derive_messages(records)``
    (a property test checks this after every record of random logs).

    The history is split in two.  The *stable* part is a prefix of the
    history that no record appended later can change; the *window* is
    derived again from its records when asked.  A window is closed (its
    messages join the stable part) just before a record that insulates
    everything before it from what comes after:

    * a ``user/message`` with content, when the history ends with an
      assistant message: the user message can never be emptied, so nothing
      merges across it, and tool results after it pair only with later
      calls;
    * an ``assistant/message`` with visible text, when the history ends with
      a user message: likewise, for results and merges before it.

    So the window is at most one turn, or the steps since the last one that
    said something.  The few records that can reach across the boundary
    (a ``refusal`` turn end for a turn in the stable part, a late result
    for a call the stable part dropped, a stable boundary undone by a
    refusal) make the projection start again from the whole log: correct,
    and never seen in a log that `check_log` accepts.

    A completed compaction starts the projection again too, from the
    records it leaves (`compacted_records`): from then on the projection
    works on that shorter list (``_src``), extended by every later record.
    The next compaction is applied to that list (`apply_compaction`), not to
    the whole log, when the two give the same records: when it keeps
    nothing from before the current one's ``kept_from`` (``_floor``) but
    what the list holds, as every compaction the loop plans does
    (`acp_bridge.compaction.plan.plan_compaction`).  So a long session
    compacts at a cost that follows its history, not its log.
    """

    __slots__ = (
        "_attempts",
        "_cache",
        "_dropped",
        "_floor",
        "_floor_pins",
        "_memo",
        "_refused",
        "_replaced",
        "_seen",
        "_src",
        "_stable",
        "_stable_raw_role",
        "_stable_turns",
        "_start",
        "_used",
        "_view",
        "records",
    )

    def __init__(self, records: list[dict[str, Any]] | None = None) -> None:
        self.records: list[dict[str, Any]] = [] if records is None else records
        # The records the history is projected from: ``records`` itself until
        # a compaction, then what the last compaction left plus what followed.
        self._src = cast(list[Mapping[str, Any]], self.records)
        # The ``kept_from`` of the compaction ``_src`` starts with (None: no
        # compaction since the start or the last /clear).
        self._floor: int | None = None
        # The integer ``pinned`` of that compaction (what it kept from below the floor).
        self._floor_pins: frozenset[int] = frozenset()
        # Sets that stay empty in most sessions share one empty frozenset (an
        # empty set costs 216 bytes, and an idle session keeps them all);
        # one is replaced by a new set when it grows, which is rare.
        self._refused: AbstractSet[Any] = _NONE
        # Regenerates: the attempts at each user turn, and the turns whose
        # replies a later attempt replaced (as `replaced_turns` computes them).
        self._attempts: dict[int, list[int]] = {}
        self._replaced: AbstractSet[Any] = _NONE
        self._seen = 0
        # The last view `messages` made: (the window's messages and the
        # stable list it was made from, the view).  A window's list is never
        # changed once derived (a new window is a new list).
        self._view: tuple[object, list[Message], HistoryView] | None = None
        self._reset()
        # Records given here are projected on first use (`append`, `messages`):
        # loading a long session does not pay for a history it may never need.

    def append(self, record: dict[str, Any]) -> None:
        """Add a record to the log (any type; only surface records and turn ends matter)."""
        self.records.append(record)
        self._catch_up()

    def messages(self) -> HistoryView:
        """The current history, as an immutable view (share it; do not mutate its messages).

        A turn asks for it more than once with nothing appended in between
        (the context estimate, then the request): while the window's
        messages and the stable part are those it was made from, the same
        view is returned, not a copy of the window again.
        """
        self._catch_up()
        window = self._window()[0]
        stable = self._stable
        made = self._view
        if made is not None and made[0] is window and made[1] is stable:
            view = made[2]
            if view._count == len(stable):
                return view
        view = HistoryView(stable, len(stable), tuple(window))
        self._view = (window, stable, view)
        return view

    def surface(self) -> Surface:
        """`acp_bridge.log.derive.live_surface` of the records, from the projection's own list."""
        self._catch_up()
        return Surface(live_records(self._src, self._refused, self._replaced), self._floor)

    def messages_after(self, compaction: Mapping[str, Any]) -> list[Message]:
        """``derive_messages`` of the records and then ``compaction`` (a completed
        compaction not yet appended): the history it would leave."""
        self._catch_up()
        view = self._compacted(self._src, compaction)
        whole = compacted_records([*self.records, compaction]) if view is None else view
        live = live_records(whole, self._refused, self._replaced)
        return settle([surface_message(record) for record in live])[0]

    # -- internals ------------------------------------------------------------

    def _reset(self) -> None:
        self._stable: list[Message] = []  # append-only until the next reset
        self._start = 0  # index of the window's first record
        # Tool call ids kept by the first repair pass over the stable part:
        # the window's calls with these ids are repeats.
        self._used: frozenset[str] = _NONE
        self._stable_turns: set[Any] | frozenset[Any] = _NONE
        self._stable_raw_role: str | None = None  # of the stable part's last raw message
        # Ids of calls in stable records that the stable part left out.
        self._dropped: set[str] | frozenset[str] = _NONE
        self._cache: tuple[int, list[Message], set[str], list[Message]] | None = None
        # The raw message (`surface_message`) of each record of the window
        # made so far, by the record's id, with the record (so an id reused
        # by another record never matches): the window is derived again as
        # records arrive, and each record's message is made once.
        self._memo: dict[int, tuple[Mapping[str, Any], Message]] = {}

    def _catch_up(self) -> None:
        records = self.records
        while self._seen < len(records):
            record = records[self._seen]
            self._seen += 1
            kind = record.get("type")
            if kind == "turn/start" and is_clear(record):
                self._note_regenerate(record)  # a hand-written /clear may also regenerate
                self._restart([], None, frozenset())
            elif kind == "compaction" and completed_compaction(record):
                self._compact(record)
            elif self._src is not records:
                self._src.append(record)
                self._see(len(self._src) - 1, record)
            else:
                self._see(self._seen - 1, record)

    def _compact(self, record: Mapping[str, Any]) -> None:
        """A completed compaction (``records[seen - 1]``): project from the records it leaves."""
        before = self.records[: self._seen - 1] if self._src is self.records else self._src
        view = self._compacted(before, record)
        if view is None:
            view = list(compacted_records(self.records[: self._seen]))
        self._restart(view, record["kept_from"], pinned_seqs(record))

    def _restart(
        self, src: list[Mapping[str, Any]], floor: int | None, pins: frozenset[int]
    ) -> None:
        """Project from ``src`` from scratch (after a compaction, or ``[]`` after a /clear)."""
        self._src, self._floor, self._floor_pins = src, floor, pins
        self._reset()
        for index, record in enumerate(self._src):
            if record.get("type") in SURFACE_TYPES:
                self._see(index, record)

    def _compacted(
        self, before: Sequence[Mapping[str, Any]], compaction: Mapping[str, Any]
    ) -> list[Mapping[str, Any]] | None:
        """`apply_compaction` of ``before`` (the projection's records before
        ``compaction``) when that equals `compacted_records` of the whole log
        up to it; else None.

        It does when no compaction came before (``before`` is then the whole
        log, or all of it since a /clear).  After one, the whole log's rule
        also takes the records that compaction summarized when their ``seq``
        is pinned, or at least ``kept_from``.  What it summarized has a
        ``seq`` below its ``kept_from`` (the floor) and not among its pins,
        so only a ``kept_from`` below the floor, or a pin below it that the
        previous compaction did not pin, reaches them.  (A test on the seqs
        the list holds would not do: a late record may repeat a ``seq``.)
        """
        floor = self._floor
        if floor is not None:
            if compaction["kept_from"] < floor:
                return None
            kept = self._floor_pins
            if not all(seq >= floor or seq in kept for seq in pinned_seqs(compaction)):
                return None
        return apply_compaction(before, compaction)

    def _see(self, index: int, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "turn/start":
            if self._note_regenerate(record):
                # Earlier replies to that turn, usually in the stable part,
                # leave the history.  Rare (a user's request): start again
                # from the whole log.
                self._reset()
            else:
                self._pass_over(index)
            return
        if kind == "turn/end":
            if leaves_out(record):
                self._refused = {*self._refused, record.get("turn")}
                self._cache = None
                if record.get("turn") in self._stable_turns:
                    self._reset()
            else:
                self._pass_over(index)
            return
        if kind not in SURFACE_TYPES:
            self._pass_over(index)
            return
        if kind != "user/message" and record.get("turn") in self._replaced:
            return
        if kind == "tool/result" and record.get("tool_call_id") in self._dropped:
            self._reset()
        elif kind != "tool/result" and record.get("turn") not in self._refused:
            message = surface_message(record)
            closed = self._maybe_close_window(index, message)
            self._memo[id(record)] = (record, message)
            if closed and not has_tool_blocks((message,)):
                # The new window is this message alone: what `_window` would
                # derive (it insulates, so it is kept as it is, and a message
                # without tool blocks pairs nothing), without deriving it.
                self._cache = (index + 1, [message], set(self._used), [message])
                return
        self._cache = None

    def _pass_over(self, index: int) -> None:
        """``records[index]`` changes nothing of the window (no surface record,
        no turn refused or replaced): a window derived up to it is the window
        up to and including it, as `live_records` leaves such records out."""
        cache = self._cache
        if cache is not None and cache[0] == index:
            self._cache = (index + 1, cache[1], cache[2], cache[3])

    def _note_regenerate(self, record: Mapping[str, Any]) -> bool:
        """Note the turn a ``turn/start`` regenerates, if it names one (True)."""
        target, turn = record.get("regenerates"), record.get("turn")
        if type(target) is not int or type(turn) is not int:
            return False
        replaced = set(self._replaced)
        note_regenerate(self._attempts, replaced, target, turn)
        self._replaced = replaced
        return True

    def _maybe_close_window(self, index: int, message: Message) -> bool:
        """Close the window before ``records[index]`` if that record insulates
        it; whether it did."""
        window, first_used, raw = self._window(index)
        last = window[-1] if window else self._stable[-1] if self._stable else None
        # The raw message before it must not merge with it either (an empty
        # interrupted assistant message still passes its flag on).
        last_raw_role = raw[-1]["role"] if raw else self._stable_raw_role
        if last is None or last_raw_role == message["role"]:
            return False
        if not _insulates(message, last["role"]):
            return False
        self._stable_raw_role = last_raw_role
        self._stable.extend(window)
        self._used = frozenset(first_used) if first_used else _NONE
        turns = {
            record.get("turn")
            for record in self._src[self._start : index]
            if record.get("type") in SURFACE_TYPES
        }
        self._stable_turns = _grown(self._stable_turns, turns)
        dropped = {
            block["id"]
            for raw_message in raw
            for block in raw_message["content"]
            if block["type"] == "tool_call" and block["id"] not in first_used
        }
        self._dropped = _grown(self._dropped, dropped)
        self._start = index
        self._cache = None
        self._memo = {}
        return True

    def _window(self, end: int | None = None) -> tuple[list[Message], set[str], list[Message]]:
        """The window's messages for ``records[start:end]``, the ids kept, its raw messages."""
        end = len(self._src) if end is None else end
        cache = self._cache
        if cache is not None and cache[0] == end:
            return cache[1], cache[2], cache[3]
        raw = self._raw(end)
        if self._stable and raw and not _insulates(raw[0], self._stable[-1]["role"]):
            self._reset()  # the boundary was undone (a refused turn): start again
            raw = self._raw(end)
        messages, first_used = settle(raw, self._used, keep_leading=bool(self._stable))
        self._cache = (end, messages, first_used, raw)
        return messages, first_used, raw

    def _raw(self, end: int) -> list[Message]:
        live = live_records(self._src[self._start : end], self._refused, self._replaced)
        memo = self._memo
        raw: list[Message] = []
        for record in live:
            known = memo.get(id(record))
            if known is None or known[0] is not record:
                known = memo[id(record)] = (record, surface_message(record))
            raw.append(known[1])
        return raw


def _grown(found: set[T] | frozenset[T], more: set[T]) -> set[T] | frozenset[T]:
    """``found`` with ``more`` added: in place once it is a set of its own."""
    if not more:
        return found
    if isinstance(found, set):
        found.update(more)
        return found
    return more | found


def _insulates(message: Message, previous_role: str) -> bool:
    """Whether ``message``, after a message of ``previous_role``, separates the history."""
    if message["role"] == previous_role:
        return False
    if message["role"] == "user":
        return any(block["type"] != "tool_result" for block in message["content"])
    return any(block["type"] in TEXT_TYPES for block in message["content"])


class HistoryView(Sequence[dict[str, Any]]):
    """An immutable view of a history: the stable messages it was made with, then the window.

    The stable list only ever grows at its end, so a view keeps its length
    and never sees later messages; making one copies only the window.
    """

    __slots__ = ("_count", "_stable", "_window")

    def __init__(self, stable: list[Message], count: int, window: tuple[Message, ...]) -> None:
        self._stable = stable
        self._count = count
        self._window = window

    def __len__(self) -> int:
        return self._count + len(self._window)

    def parts(self) -> tuple[list[Message], int, tuple[Message, ...]]:
        """The stable list (its first ``count`` messages are this view's; the
        list only grows, until the projection starts again with a new one),
        ``count``, and the window: for callers that keep a per-message memo."""
        return self._stable, self._count, self._window

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("history index out of range")
        if index < self._count:
            return self._stable[index]
        return self._window[index - self._count]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"
