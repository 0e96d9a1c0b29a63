"""Spawning a group of warm engines (`soulwire serve --processes N`) with the standard library
alone: `soulwire fleet run` spawns its first task's engines from here before it imports anyio,
asyncio or the task model, a tenth of a second sooner on the way to the first task (the engine
group's start-up is the longest part of it). Also the engine settings a task line carries
(`engine_flags`, `GroupKey`), read from the first line before the file is validated."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from soulwire.wire.environment import SERVER_TOKEN_ENV
from soulwire.wire.session_settings import SessionSettings

if TYPE_CHECKING:
    from soulwire.fleet.tasks import Task


_TASK_SETTINGS = {
    "model": "model",
    "thinking": "thinking",
    "max_steps": "max_steps_per_turn",
    "sandbox": "sandbox",
    "sandbox_network": "sandbox_network",
    "checkpoints": "checkpoints",
    "overlay": "overlay",
}
"""A task's field → the session setting it is (`approval: "yolo"` is `yolo`)."""


def task_session_settings(task_fields: Mapping[str, Any]) -> SessionSettings:
    """The session settings of a task, from its fields (validated or not): the one mapping
    from a task line to its engine's settings."""
    settings: dict[str, Any] = {ours: task_fields.get(theirs) for theirs, ours in _TASK_SETTINGS.items()}
    return SessionSettings(yolo=task_fields.get("approval") == "yolo", **settings)


@dataclass(frozen=True)
class PeekedTask:
    """A task's engine settings as its JSON line has them, unvalidated (`peek_first_task`)."""

    settings: SessionSettings
    config: dict[str, Any] | None = None
    config_file: Path | None = None
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())

    def session_settings(self) -> SessionSettings:
        return self.settings


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
                    if not (isinstance(raw, dict) and list(raw) == ["fleet"]):  # (the run's settings)
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
            task_session_settings(fields),
            config=fields.get("config"),
            config_file=(path.absolute().parent / Path(config_file).expanduser()).absolute()
            if isinstance(config_file, str)
            else None,
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
    flags += task.session_settings().engine_flags()
    return tuple(flags)


@dataclass(frozen=True)
class GroupKey:
    flags: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, task: Task | PeekedTask) -> GroupKey:
        return cls(engine_flags(task), tuple(sorted(task.env.items())))


def default_engines_per_group(cpus: int | None = None) -> int:
    """Engines (forked copies of one process) per group of settings on a machine with `cpus`
    CPUs (default: this one's): one per CPU, at most 4."""
    return max(1, min(4, cpus if cpus is not None else os.cpu_count() or 1))


def engine_home() -> Path:
    """The working directory of warm engine processes (sessions name their own)."""
    return Path(tempfile.gettempdir())


def command_argv(executable: Any) -> list[str]:
    """The engine command as argv (a list or a path as it is; None: the SDK's lookup)."""
    if isinstance(executable, str | os.PathLike):
        return [os.fspath(cast("str | os.PathLike[str]", executable))]
    if executable is not None:
        argv = [str(part) for part in cast("list[Any]", executable)]
        if argv:
            return argv
    from soulwire.sdk.options import resolve_executable  # raises the SDK's EngineNotFoundError

    return resolve_executable(executable)


def task_environ(
    env: Mapping[str, str], *, settings_env: Mapping[str, str] | None = None, inherit: bool = True
) -> dict[str, str]:
    """The environment of what a task runs (its engine, check and external tools): this
    process's unless not inherited, the fleet settings' over it, the task's over both."""
    return {**(os.environ if inherit else {}), **(settings_env or {}), **env}


def serve_command(command: list[str], flags: tuple[str, ...], *, work_dir: Path, count: int) -> list[str]:
    """The argv of a warm engine group: `soulwire serve` on 127.0.0.1, any free port (one per
    forked copy with `count` > 1), exiting when its stdin ends."""
    return [
        *command,
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


def spawn_serve(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """Spawn `argv` (from `serve_command`) in a session of its own with a new token (returned
    with the process); its stderr is a pipe (it says where it listens there), its stdin a pipe
    this process holds until it stops the engine."""
    token = secrets.token_urlsafe(24)
    process = subprocess.Popen(
        argv,
        env={**env, SERVER_TOKEN_ENV: token},
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    return process, token


@dataclass
class EarlyGroup:
    """The first task's engine group, spawned before the event loop exists (`spawn_first_group`)."""

    key: GroupKey
    process: subprocess.Popen[bytes]
    token: str
    count: int


def spawn_first_group(tasks_path: Path, *, engine: str | None, per_group: int | None) -> EarlyGroup | None:
    """Spawn the engines the first task of `tasks_path` will use, as the warm backend would
    with its default settings (`engine`: the `--engine` command). None when the first line
    does not look like a task or the spawn fails (the backend spawns again and reports why)."""
    first = peek_first_task(tasks_path)
    if first is None:
        return None
    key = GroupKey.of(first)
    count = per_group or default_engines_per_group()
    command = command_argv(engine or default_engine_command())
    argv = serve_command(command, key.flags, work_dir=engine_home(), count=count)
    try:
        process, token = spawn_serve(argv, task_environ(dict(key.env)))
    except OSError:
        return None
    return EarlyGroup(key, process, token, count)


def default_engine_command() -> list[str]:
    """This Python's soulwire, so the fleet and its engines match (`EngineSettings`' default)."""
    return [sys.executable, "-m", "soulwire"]


__all__ = [
    "EarlyGroup",
    "GroupKey",
    "PeekedTask",
    "command_argv",
    "default_engine_command",
    "default_engines_per_group",
    "engine_flags",
    "engine_home",
    "peek_first_task",
    "serve_command",
    "spawn_first_group",
    "spawn_serve",
    "task_environ",
]
