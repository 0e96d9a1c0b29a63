"""Child processes that cannot outlive their tool call.

Each command runs in its own session (hence its own process group, with no controlling
terminal). On timeout or cancellation the whole group gets SIGTERM, then SIGKILL after a
short grace, inside a shielded, time-bounded scope: grandchildren (`sleep 30 &`) die with the
command and a cancelled turn still ends promptly. A command that ends by itself is waited for
until its output closes; background jobs it detached from that output on purpose
(`server > log 2>&1 &`) are left running, as in a terminal, until the engine ends: every
group is tied to the engine's life (tools/lifetime.py), SIGKILL of the engine included."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

import anyio
import anyio.to_thread

from soulwire.tools.builtin.output import OMITTED
from soulwire.tools.lifetime import ready_to_tie, tie_to_engine
from soulwire.tools.procfs import processes

KILL_GRACE_S = 0.25
"""How long a group may take to exit after SIGTERM before it gets SIGKILL."""
REAP_LIMIT_S = 1.0
_READ_CHUNK = 65_536


class Capture:
    """Keeps the first `head` and the last `tail` bytes of a stream, and counts the rest."""

    def __init__(self, head: int, tail: int = 0) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_limit:
            self.tail += chunk
            if len(self.tail) > self._tail_limit:
                del self.tail[: len(self.tail) - self._tail_limit]

    @property
    def dropped(self) -> int:
        """Bytes seen but kept neither in the head nor in the tail."""
        return self.total - len(self.head) - len(self.tail)

    @property
    def full(self) -> bool:
        """The head is full and no tail is kept: reading on is pointless."""
        return not self._tail_limit and len(self.head) >= self._head_limit

    def text(self, marker: str = OMITTED) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        tail = self.tail.decode("utf-8", "replace")
        return head + marker + tail if self.dropped else head + tail


class Finished(NamedTuple):
    """How a child process ended."""

    returncode: int | None
    """None when it was killed for running out of time."""
    timed_out: bool
    complete: bool = True
    """False when reading stopped early because the capture was full."""


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Whether a live process is left in the group. Exited orphans stay zombies until their
    new parent reaps them, which some init processes do late or never, so on Linux the
    members' states are looked at rather than trusting `killpg(pgid, 0)` alone."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    listed = processes()
    if listed is None:
        return True
    return any(p.pgid == pgid and p.state not in (b"Z", b"X") for p in listed)


async def wait_exit(process: subprocess.Popen[bytes]) -> int:
    """Wait for the process to exit (and reap it) without blocking the event loop."""
    if process.poll() is not None:
        return process.returncode
    if hasattr(os, "pidfd_open"):  # Linux: a pidfd becomes readable when the process exits
        pidfd = os.pidfd_open(process.pid)
        try:
            while process.poll() is None:
                await anyio.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return process.returncode
    return await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)


async def terminate_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL whatever is left after the grace period, reap the
    leader. Shielded and bounded, so it also completes while the caller is being cancelled."""
    pgid = process.pid  # the leader of a new session: its pid is the group id
    with anyio.CancelScope(shield=True):
        signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(KILL_GRACE_S):
            await wait_exit(process)
            while group_alive(pgid):
                await anyio.sleep(0.01)
        signal_group(pgid, signal.SIGKILL)
        with anyio.move_on_after(REAP_LIMIT_S):
            await wait_exit(process)


async def _pump(fd: int | None, sink: Capture) -> bool:
    """Read the pipe `fd` into `sink` until EOF; False when it stopped early because the sink
    is full."""
    if fd is None:
        return True
    while not sink.full:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        if not chunk:
            return True
        sink.feed(chunk)
    return False


def _nonblocking_fd(stream: IO[bytes] | None) -> int | None:
    if stream is None:
        return None
    fd = stream.fileno()
    os.set_blocking(fd, False)
    return fd


async def run_captured(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    out: Capture,
    err: Capture | None = None,
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
) -> Finished:
    """Run `argv` with stdin closed (or reading the file `stdin`); stdout goes to `out`,
    stderr to `err` (or into `out` when `err` is None). Waits for the output to end and the
    process to exit, at most `timeout` seconds; stops the process once `out` is full.
    Cancelling the caller kills the process group.

    Plain `Popen` (vfork + exec) with the pipes and a pidfd watched by the event loop: no
    watcher thread and no transport objects per command, which keeps tool steps cheap."""
    env = ready_to_tie(env)
    process = subprocess.Popen(  # noqa: ASYNC220  (on purpose: vfork + exec, see above)
        list(argv),
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if err is not None else subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    tie_to_engine(process.pid, env=env)
    finished = complete = False
    try:
        out_fd, err_fd = _nonblocking_fd(process.stdout), _nonblocking_fd(process.stderr)
        with anyio.move_on_after(timeout):
            if err is None:
                complete = await _pump(out_fd, out)
            else:
                async with anyio.create_task_group() as group:
                    group.start_soon(_pump, err_fd, err)
                    complete = await _pump(out_fd, out)
                    if not complete:
                        group.cancel_scope.cancel()
            if complete:
                await wait_exit(process)
            finished = True
    finally:
        with anyio.CancelScope(shield=True):
            if not (finished and complete):  # timeout, cancellation, full capture, or an error
                await terminate_group(process)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    if not finished:
        return Finished(returncode=None, timed_out=True)
    return Finished(returncode=process.returncode, timed_out=False, complete=complete)
