"""Two bridges remembering "always" answers at the same moment both keep theirs.

Each process stands for a bridge of another editor window: they share the
state directory's ``permissions.json`` and each remembers its own tools while
the others do the same.  Without the lock between processes, a
read-modify-write of one replaces the file with a copy that misses what
another wrote in between.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from acp_bridge.tools import rules_store

WRITER = """
import sys
from acp_bridge.tools import rules_store
state, cwd, who, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.stdin.readline()  # start together
for i in range(count):
    rules_store.remember(state, cwd, f"tool_{who}_{i}", "allow_always")
"""


def test_concurrent_bridges_keep_every_rule(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    cwd = str(tmp_path)
    writers, count = 4, 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, state, cwd, str(who), str(count)],
            stdin=subprocess.PIPE,
        )
        for who in range(writers)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    rules = rules_store.rules_for(state, cwd)
    expected = {f"tool_{who}_{i}" for who in range(writers) for i in range(count)}
    assert set(rules) == expected
    assert set(rules.values()) == {"allow_always"}
