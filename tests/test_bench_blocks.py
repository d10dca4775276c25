"""The turn-overhead benchmark's blocks never split a mark's window.

Each agent runs its turns in blocks, the agents in turn; the round trips just
after another agent's block are those of a process woken after seconds idle.
A mark's window must therefore be run in one block.
"""

from __future__ import annotations

import pytest
from support.harness import ROOT


@pytest.mark.parametrize(
    ("block", "marks"),
    [
        (500, (10, 4000)),
        (100, (10, 300)),
        (7, (10, 50)),
        (500, (10, 10_000)),
        (3, (5, 9)),
    ],
)
def test_every_window_runs_in_one_block(
    block: int, marks: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from bench.turns import _block_end

    half = 5
    windows = [range(m - half + 1, m + half + 1) for m in marks]
    total = marks[-1] + half
    ends = []
    done = 0
    while done < total:
        end = _block_end(done, block, total, windows)
        assert done < end <= total
        assert end == min(done + block, total) or any(end == w.stop - 1 for w in windows)
        ends.append(end)
        done = end
    assert ends[-1] == total
    for window in windows:
        # No block ends after one of the window's turns and before the next.
        assert not any(window.start <= end < window.stop - 1 for end in ends), (window, ends)
