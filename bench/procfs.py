"""What /proc says about an agent process tree: memory, CPU time, disk usage."""

from __future__ import annotations

import os
import resource
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` plus its descendants (in case the command is a wrapper)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_rss_kib(int(child))
    except (OSError, ValueError):
        pass
    return total


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` plus its descendants."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_cpu_s(int(child))
    except (OSError, ValueError, IndexError):
        pass
    return total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dir_usage(path: Path | None) -> tuple[int, int]:
    """(number of files, total bytes) under ``path``."""
    files = size = 0
    if path is None:
        return 0, 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size
