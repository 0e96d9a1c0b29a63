"""Warm engines as processes: the `soulwire serve --processes N` a group of engines is, its
start (`spawn_engines`, then `StartingEngines.ready`), its stop, and the flags that carry a
task's engine settings. Light on imports on purpose: `soulwire fleet run` spawns its first
engines with only this and the task model loaded, and imports the rest while they start."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.abc import Process

from soulwire.fleet.errors import EngineError

if TYPE_CHECKING:
    from soulwire.fleet.backend import EngineSettings
    from soulwire.fleet.tasks import Task

_LISTENING = "listening on "
_COPY_EXITED = ") exited (code "
"""How `soulwire serve --processes N` reports a forked copy that died (server/prefork.py)."""


@dataclass(frozen=True)
class PeekedTask:
    """A task's engine settings as its JSON line has them, unvalidated (`peek_first_task`)."""

    config: dict[str, Any] | None = None
    config_file: Path | None = None
    model: str | None = None
    approval: object = None
    thinking: bool | None = None
    max_steps: int | None = None
    sandbox: str | None = None
    sandbox_network: bool | None = None
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())


def peek_first_task(path: Path) -> PeekedTask | None:
    """The engine settings of the file's first task, read with the standard library alone:
    `soulwire fleet run` spawns that task's warm engines before it imports the task model
    (pydantic, a quarter of a second) and validates the file. None when the line does not
    look like a task; a guess that validation then contradicts gives a different
    `GroupKey`, and those engines are stopped unused."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                text = line.strip()
                if text and not text.startswith("#"):
                    raw = json.loads(text)
                    break
            else:
                return None
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    fields = cast("dict[str, Any]", raw)
    config_file = fields.get("config_file")
    env: Any = fields.get("env") or {}
    env = {str(k): str(v) for k, v in cast("dict[Any, Any]", env).items()} if isinstance(env, dict) else {}
    try:
        return PeekedTask(
            config=fields.get("config"),
            config_file=(path.absolute().parent / Path(config_file).expanduser()).absolute()
            if isinstance(config_file, str)
            else None,
            model=fields.get("model"),
            approval=fields.get("approval", "reject"),
            thinking=fields.get("thinking"),
            max_steps=fields.get("max_steps"),
            sandbox=fields.get("sandbox"),
            sandbox_network=fields.get("sandbox_network"),
            env=env,
        )
    except (TypeError, ValueError):
        return None


def engine_flags(task: Task | PeekedTask) -> tuple[str, ...]:
    """The `soulwire serve` options that carry a task's engine settings."""
    flags: list[str] = []
    if task.config is not None:
        flags += ["--config", json.dumps(task.config, sort_keys=True)]
    if task.config_file is not None:
        flags += ["--config-file", str(task.config_file)]
    if task.model is not None:
        flags += ["--model", task.model]
    if task.approval == "yolo":
        flags.append("--yolo")
    if task.thinking is not None:
        flags.append("--thinking" if task.thinking else "--no-thinking")
    if task.max_steps is not None:
        flags += ["--max-steps-per-turn", str(task.max_steps)]
    if task.sandbox is not None:
        flags += ["--sandbox", task.sandbox]
    if task.sandbox_network is not None:
        flags += ["--sandbox-network", "on" if task.sandbox_network else "off"]
    return tuple(flags)


@dataclass(frozen=True)
class GroupKey:
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, task: Task | PeekedTask) -> GroupKey:
        return cls(engine_flags(task), tuple(sorted(task.env.items())))


OPENING_AT_ONCE = 2
"""Sessions an engine opens at once; the rest wait their turn, in the order they came."""


@dataclass
class ServeEngine:
    """One `soulwire serve` process on 127.0.0.1 with a token of its own (or one of the
    copies such a process forked: `--processes N`, one port each)."""

    process: Process
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


def default_engines_per_group(cpus: int | None = None) -> int:
    """Engines (forked copies of one process) per group of settings on a machine with `cpus`
    CPUs (default: this one's): one per CPU, at most 4."""
    return max(1, min(4, cpus if cpus is not None else os.cpu_count() or 1))


def engine_home() -> Path:
    """The working directory of warm engine processes (sessions name their own)."""
    return Path(tempfile.gettempdir())


def _command(executable: Any) -> list[str]:
    """The engine command as argv (a list or a path as it is; None: the SDK's lookup)."""
    if isinstance(executable, str | os.PathLike):
        return [os.fspath(cast("str | os.PathLike[str]", executable))]
    if executable is not None:
        argv = [str(part) for part in cast("list[Any]", executable)]
        if argv:
            return argv
    from soulwire.sdk.options import resolve_executable  # raises the SDK's EngineNotFoundError

    return resolve_executable(executable)


async def spawn_engines(
    settings: EngineSettings, flags: tuple[str, ...], env: dict[str, str], *, work_dir: Path, count: int = 1
) -> StartingEngines:
    """Spawn `soulwire serve --listen 127.0.0.1:0` (with `--processes count`: one process that
    loads once and forks, each copy on its own port) without waiting for it to listen."""
    token = secrets.token_urlsafe(24)
    base = dict(os.environ) if settings.inherit_env else {}
    full_env = {**base, **settings.env, **env, "SOULWIRE_SERVER_TOKEN": token}
    if settings.share_dir is not None:
        full_env["SOULWIRE_SHARE_DIR"] = str(settings.share_dir)
    argv = [
        *_command(settings.executable),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--work-dir",
        str(work_dir),
        "--idle-timeout",
        "2",
        "--exit-with-stdin",  # we hold its stdin: if this process dies, so does the engine
        *(("--processes", str(count)) if count > 1 else ()),
        *flags,
    ]
    process = await anyio.open_process(
        argv, env=full_env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True
    )
    return StartingEngines(process, token, count, settings.startup_timeout)


@dataclass
class StartingEngines:
    """A spawned `soulwire serve` not yet known to listen: `ready` waits for its addresses."""

    process: Process
    token: str
    count: int
    startup_timeout: float

    async def ready(self) -> tuple[list[ServeEngine], Any]:
        """The engines once every copy listens, and a coroutine function that pumps the
        process's stderr until it exits (to run in a task). Kills the process and raises
        `EngineError` if it does not start; kills it too when cancelled."""
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
            raise EngineError(f"soulwire serve did not start in {self.startup_timeout:g}s") from None
        except BaseException:  # cancelled while starting: leave no process behind
            with anyio.CancelScope(shield=True):
                await self.kill()
            raise
        if len(urls) < count:
            await self.kill()
            raise EngineError(f"soulwire serve exited (code {process.returncode}): {' | '.join(lines[-3:])}")
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


def _kill(process: Process, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = [
    "GroupKey",
    "PeekedTask",
    "ServeEngine",
    "StartingEngines",
    "default_engines_per_group",
    "engine_flags",
    "engine_home",
    "peek_first_task",
    "spawn_engines",
    "start_engine",
    "start_engines",
    "stop_engine",
]
