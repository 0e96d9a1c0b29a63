"""One fleet run at a time per results file and per run dir: two runs of the same command
would both run every unfinished task, in the same workspaces, and write each result twice.
Advisory `flock`s, so a killed driver's locks go with it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from soulwire.fleet.errors import FleetError

LOCK_NAME = ".fleet-lock"
"""The lock file in a run dir (task ids cannot start with a dot, so no task dir is named so)."""


class RunInUseError(FleetError, RuntimeError):
    """Another fleet run holds the results file or the run dir; the message is one line."""


class RunLock:
    """Exclusive locks on a run's results file and run dir, held until `release`."""

    def __init__(self, handles: list[IO[bytes]]) -> None:
        self._handles = handles

    @classmethod
    def acquire(cls, out: Path | None, run_dir: Path) -> RunLock:
        """Lock `run_dir` (its lock file, which names this process and `out`) and `out` (the
        file itself); raises RunInUseError, naming the other run's process when it has the
        run dir, if another run has either."""
        handles: list[IO[bytes]] = []
        made = not run_dir.exists()
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            marker = (run_dir / LOCK_NAME).open("a+b")
            handles.append(marker)
            if not _try_lock(marker):
                raise RunInUseError(f"{run_dir} is in use by another fleet run{_holder(marker)}")
            marker.truncate(0)
            named = f"{out.absolute()}\n" if out is not None else ""
            marker.write(f"{os.getpid()}\n{named}".encode())
            marker.flush()
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                results_file = out.open("ab")
                handles.append(results_file)
                if not _try_lock(results_file):
                    raise RunInUseError(f"{out} is being written by another fleet run{_HINT}")
        except BaseException:
            for handle in handles:
                handle.close()
            if made:  # a refused run leaves no trace
                with contextlib.suppress(OSError):
                    (run_dir / LOCK_NAME).unlink()
                    run_dir.rmdir()
            raise
        return cls(handles)

    def release(self) -> None:
        for handle in self._handles:
            handle.close()  # (closing the file drops its lock)
        self._handles = []


def _try_lock(handle: IO[bytes]) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def fleet_outputs(run_dir: Path) -> frozenset[str]:
    """The fleet's own files (the run dir, and the results file its lock names): a workspace
    that contains them (`"workspace": "."` beside the task file) is copied, packed and diffed
    without them — else each copy would hold the others' workspaces, down to "file name too
    long", and each diff the results file as it grew."""
    paths = {str(run_dir.absolute())}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        lines = (run_dir / LOCK_NAME).read_text(encoding="utf-8").splitlines()
        if len(lines) > 1 and lines[1]:
            paths.add(lines[1])
    return frozenset(paths)


_HINT = "; wait for it to end, or stop it"


def _holder(marker: IO[bytes]) -> str:
    """` (pid N)` from the lock file if the other run wrote it there, and what to do."""
    with contextlib.suppress(OSError, ValueError):
        marker.seek(0)
        pid = int((marker.read().decode().split("\n", 1)[0]).strip() or "0")
        if pid > 0:
            return f" (pid {pid}){_HINT}"
    return _HINT


__all__ = ["LOCK_NAME", "RunInUseError", "RunLock", "fleet_outputs"]
