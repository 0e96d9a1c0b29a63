"""What the benchmarks read from Linux's /proc about a process (imported by the bench scripts,
which run from this directory)."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used so far (every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def cpu_ns(pid: int) -> int:
    """Nanoseconds process `pid`'s live threads have run on a CPU so far (the scheduler's own
    account, /proc/PID/task/TID/schedstat: finer than `cpu_seconds`' 10 ms ticks; a thread
    that has ended is no longer counted)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total
