"""The in-flight bound follows how fast the editor reads (`acp_bridge.transport.pace`).

A model of the writer and the stdout pipe, in steps of a tenth of a
millisecond: the stream always has more to write (full rate), the writer
looks at the pipe each step and writes while no more than the bound is
unread, into a pipe a page bigger than the bound; the editor reads at its
own pace.  What the bound becomes for each kind of editor is what the
bridge's writer does with the same `ReaderPace`.
"""

from __future__ import annotations

from collections.abc import Callable

from acp_bridge.transport.pace import BOUNDS, IN_FLIGHT, IN_FLIGHT_MAX, PAGE, WINDOW, ReaderPace

STEP = 1e-4
# What the stream produces per step: 13 MB/s, the bridge at full rate.
PRODUCED = 1300

# (time, unread) -> bytes the editor reads now.
Reader = Callable[[float, int], int]


class Model:
    def __init__(self, produced: int = PRODUCED, look_every: int = 1) -> None:
        self.produced = produced
        # The writer looks at the pipe (and writes) every this many steps.
        self.look_every = look_every
        self.pace = ReaderPace()
        self.pace.reset(0.0, 0)
        self.now = 0.0
        self.unread = 0
        self.read = 0
        self.bounds: list[int] = []

    def run(self, reader: Reader, seconds: float) -> list[int]:
        """Stream for ``seconds``; the bound after each step."""
        bounds = []
        for step in range(round(seconds / STEP)):
            self.now += STEP
            taken = min(reader(self.now, self.unread), self.unread)
            self.unread -= taken
            self.read += taken
            if step % self.look_every:
                bounds.append(self.pace.bound)
                continue
            self.pace.note(self.now, self.read, self.unread)
            bound = self.pace.bound
            if self.unread <= bound:
                self.unread += min(self.produced * self.look_every, bound + PAGE - self.unread)
                # More is queued at full rate: the writer looks again at once.
                self.pace.note(self.now, self.read, self.unread)
            bounds.append(bound)
        self.bounds += bounds
        return bounds


def every(period: float, size: int | None) -> Reader:
    """An editor that reads ``size`` bytes (None: all there is) every ``period`` seconds."""
    state = {"next": period}

    def reader(now: float, unread: int) -> int:
        if now + STEP / 2 < state["next"]:
            return 0
        state["next"] += period
        return unread if size is None else size

    return reader


def test_an_editor_that_reads_a_page_a_millisecond_keeps_the_least_bound() -> None:
    model = Model()
    bounds = model.run(every(0.001, 4096), 0.5)
    assert set(bounds) == {IN_FLIGHT}


def test_an_editor_that_empties_the_pipe_gets_the_largest_bound_within_a_few_windows() -> None:
    model = Model()
    bounds = model.run(every(0.002, None), 0.2)
    assert bounds[0] == IN_FLIGHT
    # One step up per window at most, every step taken.
    grown = [b for i, b in enumerate(bounds) if i == 0 or b != bounds[i - 1]]
    assert grown == list(BOUNDS)
    assert bounds.index(IN_FLIGHT_MAX) * STEP <= (len(BOUNDS) + 1) * WINDOW
    assert bounds[-1] == IN_FLIGHT_MAX


def test_an_editor_that_keeps_up_fast_gets_more_and_one_that_falls_behind_less() -> None:
    model = Model()
    model.run(every(0.0002, None), 0.1)  # reads all there is, 5,000 times a second
    assert model.pace.bound == IN_FLIGHT_MAX
    # Then it reads a page a millisecond: within a few windows (the first
    # still counts its fast reads, the pipe takes a few milliseconds to fill)
    # it has what it reads in a millisecond, the least bound, and keeps it.
    bounds = model.run(every(0.001, 4096), 0.3)
    settled = bounds.index(IN_FLIGHT)
    assert settled * STEP <= 4 * WINDOW
    assert set(bounds[settled:]) == {IN_FLIGHT}


def test_an_editor_that_falls_behind_gets_about_what_it_reads_in_a_millisecond() -> None:
    model = Model(produced=4 * PRODUCED)  # 52 MB/s
    model.run(every(0.002, None), 0.1)
    assert model.pace.bound == IN_FLIGHT_MAX
    bounds = model.run(every(0.001, 13 * 1024), 0.3)
    # It reads 13 KiB a millisecond and falls behind: the bound is the largest
    # no more than that (12 KiB), or the next while it keeps up with that
    # one; never the largest again.
    assert set(bounds[-round(0.2 / STEP) :]) <= {BOUNDS[1], BOUNDS[2]}
    assert BOUNDS[1] in bounds[-round(0.2 / STEP) :]


def test_each_turn_starts_from_the_least_bound() -> None:
    model = Model()
    model.run(every(0.002, None), 0.1)
    assert model.pace.fast
    model.pace.reset(model.now, model.read)
    assert model.pace.bound == IN_FLIGHT
    assert not model.pace.fast


def test_an_editor_that_reads_nothing_never_grows_the_bound() -> None:
    model = Model()
    bounds = model.run(lambda now, unread: 0, 0.2)
    assert set(bounds) == {IN_FLIGHT}


def test_a_page_a_millisecond_keeps_the_least_bound_when_the_writer_looks_late() -> None:
    """A writer off the CPU looks every 1.5 ms: two of the editor's reads may
    come between two looks and empty the pipe, which is not one big read."""
    model = Model(look_every=15)
    bounds = model.run(every(0.001, 4096), 0.5)
    assert set(bounds) == {IN_FLIGHT}
