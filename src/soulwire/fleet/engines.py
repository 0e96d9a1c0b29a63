"""Warm engines as processes: the `soulwire serve --processes N` a group of engines is, its
start (`spawn_engines`, then `StartingEngines.ready`), its stop, and the flags that carry a
task's engine settings. Light on imports on purpose: `soulwire fleet run` spawns its first
engines with only `fleet/spawn.py` loaded (the standard library) and adopts them here."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ByteReceiveStream

from soulwire.fleet.errors import EngineStartError
from soulwire.fleet.spawn import (
    EarlyGroup,
    GroupKey,
    PeekedTask,
    command_argv,
    default_engines_per_group,
    engine_flags,
    engine_home,
    peek_first_task,
    serve_command,
    spawn_serve,
)
from soulwire.wire.environment import SHARE_DIR_ENV

if TYPE_CHECKING:
    from soulwire.fleet.backend import EngineSettings

_LISTENING = "listening on "
_COPY_EXITED = ") exited (code "
"""How `soulwire serve --processes N` reports a forked copy that died (server/prefork.py)."""
_EXIT_POLL_S = 0.005
"""How often `ServeProcess.wait` looks for the exit: it is awaited only once the process was
told to stop or its stderr ended, so the wait is short."""


class _PipeStream(ByteReceiveStream):
    """A pipe's read end as an anyio byte stream (non-blocking reads when it is readable)."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe
        self._fd: int = pipe.fileno()
        os.set_blocking(self._fd, False)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._pipe.closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        self._pipe.close()


class ServeProcess:
    """A spawned `soulwire serve` (a `subprocess.Popen`, possibly spawned before any event loop
    existed) with what the fleet needs of it: its pid, its stderr as a stream, and its exit."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stderr is not None
        self._popen = popen  # (holds the stdin pipe: `--exit-with-stdin`)
        self.pid = popen.pid
        self.stderr: ByteReceiveStream = _PipeStream(popen.stderr)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:
            await anyio.sleep(_EXIT_POLL_S)
        return code


OPENING_AT_ONCE = 2
"""Sessions an engine opens at once; the rest wait their turn, in the order they came."""


@dataclass
class ServeEngine:
    """One `soulwire serve` process on 127.0.0.1 with a token of its own (or one of the
    copies such a process forked: `--processes N`, one port each)."""

    process: ServeProcess
    """The spawned `soulwire serve` (the first process, for its forked copies)."""
    url: str
    token: str
    sessions: int = 0
    """Sessions of running tasks on it (the group picks the least busy)."""
    exited: anyio.Event = field(default_factory=anyio.Event)
    stderr_tail: list[str] = field(default_factory=lambda: list[str]())
    siblings: list[ServeEngine] = field(default_factory=lambda: list[ServeEngine]())
    """The engines of the same spawned process, this one included (stopped together)."""
    opening: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(OPENING_AT_ONCE))
    """Held while a session is being opened. Opening is a few round trips (create, attach,
    `initialize`): 75 staged tasks opening at once interleave them, and the first turn waits
    for nearly all of them; a few at a time, the first tasks start as soon as theirs is open."""

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    @property
    def ws_base(self) -> str:
        """`ws://HOST:PORT` of the engine, what its session URLs start with."""
        return self.url.replace("http://", "ws://", 1)

    def describe_exit(self) -> str:
        tail = " | ".join(self.stderr_tail[-3:])
        if self.process.returncode is None:  # a forked copy died, the process that forked it lives
            return f"the engine at {self.url} exited{': ' + tail if tail else ''}"
        code = self.process.returncode
        return f"the engine process {self.process.pid} exited (code {code}){': ' + tail if tail else ''}"


async def spawn_engines(
    settings: EngineSettings, flags: tuple[str, ...], env: dict[str, str], *, work_dir: Path, count: int = 1
) -> StartingEngines:
    """Spawn `soulwire serve --listen 127.0.0.1:0` (with `--processes count`: one process that
    loads once and forks, each copy on its own port) without waiting for it to listen."""
    full_env = settings.environ(env)
    if settings.share_dir is not None:
        full_env[SHARE_DIR_ENV[0]] = str(settings.share_dir)
    argv = serve_command(command_argv(settings.executable), flags, work_dir=work_dir, count=count)
    process, token = spawn_serve(argv, full_env)
    return StartingEngines(ServeProcess(process), token, count, settings.startup_timeout)


def adopt_early(group: EarlyGroup, settings: EngineSettings) -> StartingEngines:
    """The engines `spawn_first_group` spawned before the event loop, as `spawn_engines`'."""
    return StartingEngines(ServeProcess(group.process), group.token, group.count, settings.startup_timeout)


@dataclass
class StartingEngines:
    """A spawned `soulwire serve` not yet known to listen: `ready` waits for its addresses."""

    process: ServeProcess
    token: str
    count: int
    startup_timeout: float

    async def ready(self) -> tuple[list[ServeEngine], Any]:
        """The engines once every copy listens, and a coroutine function that pumps the
        process's stderr until it exits (to run in a task). Kills the process and raises
        `EngineStartError` if it does not start; kills it too when cancelled."""
        process, count = self.process, self.count
        assert process.stderr is not None
        stderr = process.stderr
        lines: list[str] = []
        pending = b""
        urls: list[str] = []
        try:
            with anyio.fail_after(self.startup_timeout):
                while len(urls) < count:
                    try:
                        chunk = await stderr.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        break
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        line = raw.decode("utf-8", errors="replace")
                        lines.append(line)
                        if _LISTENING in line:
                            urls.append(line.split(_LISTENING, 1)[1].split()[0])
        except TimeoutError:
            await self.kill()
            raise EngineStartError(f"soulwire serve did not start in {self.startup_timeout:g}s") from None
        except BaseException:  # cancelled while starting: leave no process behind
            with anyio.CancelScope(shield=True):
                await self.kill()
            raise
        if len(urls) < count:
            await self.kill()
            raise EngineStartError(
                f"soulwire serve exited (code {process.returncode}): {' | '.join(lines[-3:])}"
            )
        tail = lines[-20:]  # one list for all: what the process says concerns each of them
        engines = [ServeEngine(process=process, url=url, token=self.token, stderr_tail=tail) for url in urls]
        for engine in engines:
            engine.siblings = engines
        by_url = {engine.url: engine for engine in engines}

        async def pump() -> None:
            rest = pending
            async for chunk in stderr:
                *complete, rest = (rest + chunk).split(b"\n")
                for raw in complete:
                    line = raw.decode("utf-8", errors="replace")
                    tail.append(line)
                    if _COPY_EXITED in line:  # `process PID (URL) exited (code C)`: that copy is gone
                        gone = by_url.get(line.partition("(")[2].partition(")")[0])
                        if gone is not None:
                            gone.exited.set()
                del tail[:-20]
            await process.wait()
            for engine in engines:
                engine.exited.set()

        return engines, pump

    async def kill(self) -> None:
        _kill(self.process)
        await self.process.wait()


async def start_engines(
    settings: EngineSettings, flags: tuple[str, ...], env: dict[str, str], *, work_dir: Path, count: int = 1
) -> tuple[list[ServeEngine], Any]:
    """`spawn_engines`, then wait until it is `ready`."""
    starting = await spawn_engines(settings, flags, env, work_dir=work_dir, count=count)
    return await starting.ready()


async def start_engine(
    settings: EngineSettings, flags: tuple[str, ...], env: dict[str, str], *, work_dir: Path
) -> tuple[ServeEngine, Any]:
    """One engine process (see `start_engines`)."""
    (engine,), pump = await start_engines(settings, flags, env, work_dir=work_dir)
    return engine, pump


async def stop_engine(engine: ServeEngine, timeout: float) -> None:
    """SIGTERM the engine's process group (running turns are cancelled, files closed; forked
    copies stop too), SIGKILL after `timeout`."""
    _kill(engine.process, signal.SIGTERM)
    with anyio.move_on_after(timeout):
        await engine.process.wait()
    _kill(engine.process)
    await engine.process.wait()
    # Gone now, with its forked copies: said here, not only when the stderr pump gets to it,
    # so a task retried at once is not given the engine that was just stopped.
    for stopped in engine.siblings or [engine]:
        stopped.exited.set()


def _kill(process: ServeProcess, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = [
    "GroupKey",
    "PeekedTask",
    "ServeEngine",
    "ServeProcess",
    "StartingEngines",
    "adopt_early",
    "default_engines_per_group",
    "engine_flags",
    "engine_home",
    "peek_first_task",
    "spawn_engines",
    "start_engine",
    "start_engines",
    "stop_engine",
]
