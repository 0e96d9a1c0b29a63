"""Reading the process table from /proc (Linux): what the process-group checks and the
engine-lifetime watchdog both need."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple


class ProcStat(NamedTuple):
    """The fields of /proc/PID/stat that group bookkeeping uses."""

    pid: int
    state: bytes
    ppid: int
    pgid: int


def processes() -> Iterator[ProcStat] | None:
    """Every process now listed, or None where there is no /proc to read."""
    if not os.path.isdir("/proc"):
        return None
    return _scan()


def _scan() -> Iterator[ProcStat]:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            yield ProcStat(int(entry.name), fields[0], int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue


__all__ = ["ProcStat", "processes"]
