"""Tool processes never outlive the engine, however it ends (SIGKILL included).

Every process a tool starts leads its own process group (`start_new_session`), so that a
timeout or a cancel can kill the command with everything it started. The flip side: nothing
ties those groups to the engine. A `kill -9` of the engine, or of its process group, would
leave a Shell command, its `( … ) &` grandchildren, background tasks and MCP servers running.

The guard is a **watchdog**: one tiny Python process per engine, started with the first tool
process (nothing at engine start-up), in a session of its own so that a signal to the engine's
group does not reach it. Its stdin is the read end of a pipe whose only write end the engine
holds (non-inheritable, so no tool process keeps it open). The engine writes the id of each
tool process group into the pipe as it starts one; when the engine dies, the kernel closes the
write end, the watchdog reads EOF and SIGKILLs every group it was told about, grandchildren
included, then exits — also when the engine exits normally, so a job a command left running
on purpose (`server > log 2>&1 &`) ends with the session. It forgets groups that are gone
(looked at every 2 s while it watches any), so an id the kernel hands out again is not killed
later (the window is those 2 s); a process that left its group on purpose (`setsid`) is not
covered. Cost per tool process: one `write` of a few bytes (bench/lifetime_bench.py).

Why not the kernel's parent-death signal (`PR_SET_PDEATHSIG`) on each child: it covers only
the direct child (it is cleared on fork, so `(sleep 1; touch m) &` escapes), it fires when the
*thread* that spawned the child exits, and setting it costs a `preexec_fn` — Python then forks
instead of vforking: 10 to 20 ms more per spawn in a 100 MB engine — or an extra `setpriv` exec,
1 to 4 ms more per Shell call (bench/lifetime_bench.py, bench/RESULTS.md §9). The watchdog covers
the whole group for a few microseconds per call. Should the watchdog itself be killed, the
next tool process starts a new one and tells it every group still alive. Platforms without
`killpg` (Windows) get no watchdog.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from contextvars import ContextVar

from soulwire.tools.procfs import processes

_WATCHDOG = """
import os, select, signal
PRUNE_EVERY_S = 2.0
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
groups, rest = set(), b""
def alive(g):
    try:
        os.killpg(g, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True
while True:
    ready, _, _ = select.select([0], [], [], PRUNE_EVERY_S if groups else None)
    if ready:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        *lines, rest = (rest + chunk).split(b"\\n")
        groups.update(int(n) for n in lines if n.strip().isdigit())
    groups = {g for g in groups if alive(g)}
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""
"""The watchdog's program (run with `python -I -S -c`: no site, no user paths, ~10 ms)."""


class _Watchdog:
    """The engine's end of the watchdog: started on first use, restarted if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def ensure_started(self) -> None:
        with self._lock:
            if self._fd is None:
                self._start()

    def watching(self, pgid: int) -> bool:
        return pgid in self._groups

    def watch(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            if self._fd is not None:
                try:
                    os.write(self._fd, b"%d\n" % pgid)
                    return
                except OSError:  # the watchdog was killed: start another one, told everything
                    os.close(self._fd)
                    self._fd = None
            self._start()

    def _start(self) -> None:
        self._groups = {g for g in self._groups if _group_exists(g)}
        read_end, write_end = os.pipe()  # both non-inheritable
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,  # a signal to the engine's group must not reach it
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        self._fd = write_end
        if self._groups:
            os.write(write_end, b"".join(b"%d\n" % g for g in self._groups))


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


_watchdog = _Watchdog() if hasattr(os, "killpg") else None


def ready_to_tie() -> None:
    """Start the watchdog now if it is not running, before a tool process is spawned: then
    the process is told to it microseconds after it starts, rather than after a Python
    process has been started for the watchdog (a window in which a SIGKILL of the engine
    would leave the first tool process behind)."""
    if _watchdog is not None:
        _watchdog.ensure_started()


_collectors: ContextVar[tuple[set[int], ...]] = ContextVar("soulwire_tool_groups", default=())


def collect_groups() -> set[int]:
    """A set that, from now on in this task and the tasks it starts, receives the id of each
    process group tied to the engine (and so do the sets of the enclosing tool calls: a
    sub-agent's commands count for the call that started it). A cancel receipt names them."""
    mine: set[int] = set()
    _collectors.set((*_collectors.get(), mine))
    return mine


def tie_to_engine(pgid: int, *, watchdog: bool = True) -> None:
    """Make sure the process group `pgid` (a tool process started with `start_new_session`)
    is SIGKILLed if the engine dies before it ends. `watchdog=False`: a group meant to
    outlive the engine (`keep_alive_on_exit`) is only named to the enclosing tool calls."""
    for groups in _collectors.get():
        groups.add(pgid)
    if watchdog and _watchdog is not None:
        _watchdog.watch(pgid)


def tie_new_children() -> None:
    """Tie every child of the engine that leads its own group (e.g. an MCP server started by
    a library that does not tell us its pid). Linux only; elsewhere a no-op."""
    if _watchdog is None:
        return
    me = os.getpid()
    for p in processes() or ():
        if p.ppid == me and p.pgid == p.pid and p.pid != _watchdog.pid and not _watchdog.watching(p.pid):
            _watchdog.watch(p.pid)
