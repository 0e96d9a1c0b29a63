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
covered. Cost per tool process: two `write`s of a few bytes (bench/lifetime_bench.py).

The group's id is known only once the process runs, and the command may act (and the engine
be killed) before the engine has written that id: under CPU load the new process easily runs
ahead of the engine's thread. So each tool process also carries a mark in its environment
(`TIE_ENV`: this engine's token and a spawn number), and the engine tells the watchdog the
number as *pending* before it spawns, the group once it runs. Should the engine die with a
spawn still pending, the watchdog finds that spawn's processes by their mark
(`/proc/PID/environ`) and kills their groups too; with none pending it reads nothing more.

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

import itertools
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Mapping
from contextvars import ContextVar

from soulwire.tools.procfs import processes

TIE_ENV = "SOULWIRE_TOOL_TIE"
"""The environment variable that marks a tool process (and what it starts) with its engine's
token and spawn number, `TOKEN.N`: how the watchdog finds a spawn the engine could not name."""

_WATCHDOG = """
import os, select, signal, sys
PRUNE_EVERY_S = 2.0
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
prefix = b"\\0" + sys.argv[1].encode() + b"="
groups, pending, rest = set(), set(), b""
def alive(g):
    try:
        os.killpg(g, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True
def marked():
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/environ", "rb") as f:
                    env = b"\\0" + f.read()
            except OSError:
                continue
            if any(prefix + m + b"\\0" in env for m in pending):
                yield int(name)
while True:
    ready, _, _ = select.select([0], [], [], PRUNE_EVERY_S if groups else None)
    if ready:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        *lines, rest = (rest + chunk).split(b"\\n")
        for line in lines:
            words = line.split()
            if len(words) == 1 and words[0].startswith(b"+"):
                pending.add(words[0][1:])
            elif words and words[0].isdigit():
                groups.add(int(words[0]))
                pending.difference_update(words[1:])
    groups = {g for g in groups if alive(g)}
if pending:
    for pid in marked():
        try:
            groups.add(os.getpgid(pid))
        except OSError:
            pass
for g in groups:
    try:
        os.killpg(g, signal.SIGKILL)
    except OSError:
        pass
"""
"""The watchdog's program (run with `python -I -S -c PROGRAM TIE_ENV`: no site, no user
paths, ~10 ms). Lines it reads: `+MARK` (a spawn about to start), `PGID [MARK]` (its group)."""


_PIPE_HOLDS = 4096
"""Bytes any pipe takes without a reader (POSIX's PIPE_BUF at least; Linux: 64 KiB)."""


class _Watchdog:
    """The engine's end of the watchdog: started on first use, restarted if it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()
        self._pending: set[str] = set()
        self._token = secrets.token_hex(8)
        self._spawns = itertools.count(1)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def expect(self) -> str:
        """Start if need be, tell the watchdog a spawn is coming; its mark (`TOKEN.N`)."""
        mark = f"{self._token}.{next(self._spawns)}"
        with self._lock:
            self._pending.add(mark)
            self._send(b"+%s\n" % mark.encode())
        return mark

    def watching(self, pgid: int) -> bool:
        return pgid in self._groups

    def watch(self, pgid: int, mark: str | None = None) -> None:
        with self._lock:
            self._groups.add(pgid)
            if mark is not None:
                self._pending.discard(mark)
            self._send(b"%d %s\n" % (pgid, (mark or "").encode()))

    def _send(self, line: bytes) -> None:
        if self._fd is not None:
            try:
                os.write(self._fd, line)
                return
            except OSError:  # the watchdog was killed: start another one, told everything
                os.close(self._fd)
                self._fd = None
        self._start()

    def _start(self) -> None:
        self._groups = {g for g in self._groups if _group_exists(g)}
        read_end, write_end = os.pipe()  # both non-inheritable
        # What it must know goes into the pipe before it starts, so that a watchdog that runs
        # knows every group told so far (the rest after, should it pass what any pipe holds).
        told = b"".join([b"%d\n" % g for g in self._groups] + [b"+%s\n" % m.encode() for m in self._pending])
        cut = told.rfind(b"\n", 0, _PIPE_HOLDS) + 1 if len(told) > _PIPE_HOLDS else len(told)
        if cut:
            os.write(write_end, told[:cut])
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, TIE_ENV],
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
        if told[cut:]:
            os.write(write_end, told[cut:])


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


_watchdog = _Watchdog() if hasattr(os, "killpg") else None


def ready_to_tie(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Get ready to spawn a tool process tied to the engine: start the watchdog now if it is
    not running (rather than after the process, a window in which a SIGKILL of the engine
    would leave it behind), tell it a spawn is coming, and return the environment to spawn
    it with: `env` (default: this process's) with the spawn's mark. Pass the same mapping to
    `tie_to_engine` once the process runs."""
    marked = dict(os.environ if env is None else env)
    if _watchdog is not None:
        marked[TIE_ENV] = _watchdog.expect()
    return marked


_collectors: ContextVar[tuple[set[int], ...]] = ContextVar("soulwire_tool_groups", default=())


def collect_groups() -> set[int]:
    """A set that, from now on in this task and the tasks it starts, receives the id of each
    process group tied to the engine (and so do the sets of the enclosing tool calls: a
    sub-agent's commands count for the call that started it). A cancel receipt names them."""
    mine: set[int] = set()
    _collectors.set((*_collectors.get(), mine))
    return mine


def tie_to_engine(pgid: int, *, watchdog: bool = True, env: Mapping[str, str] | None = None) -> None:
    """Make sure the process group `pgid` (a tool process started with `start_new_session`,
    with the environment `env` that `ready_to_tie` returned) is SIGKILLed if the engine dies
    before it ends. `watchdog=False`: a group meant to outlive the engine
    (`keep_alive_on_exit`) is only named to the enclosing tool calls."""
    for groups in _collectors.get():
        groups.add(pgid)
    if watchdog and _watchdog is not None:
        _watchdog.watch(pgid, None if env is None else env.get(TIE_ENV))


def tie_new_children() -> None:
    """Tie every child of the engine that leads its own group (e.g. an MCP server started by
    a library that does not tell us its pid). Linux only; elsewhere a no-op."""
    if _watchdog is None:
        return
    me = os.getpid()
    for p in processes() or ():
        if p.ppid == me and p.pgid == p.pid and p.pid != _watchdog.pid and not _watchdog.watching(p.pid):
            _watchdog.watch(p.pid)
