"""Waiting in tests without sleeping as synchronisation.

A test that needs something to have happened waits for that event, with a generous bound
(each suite's `wait_for`/`wait_until` loops). A test that checks that something did *not*
happen waits for a later event that proves it could no longer happen (`engine_watchdogs` and
`wait_until_exited`: once a dead engine's watchdog has exited, nothing more is killed on its
behalf). Only where no such event can exist does it sleep, through `observation_window`, which
says so at the call."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path


def observation_window(seconds: float, why: str) -> None:
    """Sleep `seconds` to give a thing that must not happen the time to happen anyway. This is
    not synchronisation: nothing is waited for, and a pass only says it did not happen within
    the window. Use it only where no later event could prove it cannot happen any more; `why`
    names what is watched (it documents the call; it is not printed)."""
    del why
    time.sleep(seconds)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def engine_watchdogs(engine_pid: int) -> list[int]:
    """The watchdog processes (tools/lifetime.py) the engine `engine_pid` has started: its
    children running the watchdog's program. Read them while the engine is alive (after its
    death they belong to another parent)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        try:
            if (
                fields
                and int(fields[1]) == engine_pid
                and b"PRUNE_EVERY_S" in (entry / "cmdline").read_bytes()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def exited(pid: int) -> bool:
    """Whether `pid` has ended (a zombie nobody reaps yet counts)."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def wait_until_exited(pids: Iterable[int], limit: float = 30.0, what: str = "the process") -> None:
    """Return once every one of `pids` has ended; fail after `limit` s."""
    pending = list(pids)
    deadline = time.monotonic() + limit
    while pending := [p for p in pending if not exited(p)]:
        assert time.monotonic() < deadline, f"{what} still running after {limit} s: {pending}"
        time.sleep(0.02)  # a poll's step, bounded by the deadline above


__all__ = ["engine_watchdogs", "exited", "observation_window", "wait_until_exited"]
