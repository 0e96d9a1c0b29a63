"""Background tasks: commands started by `Shell` with `run_in_background`, and jobs of the
engine itself such as background sub-agents (`Agent` with `run_in_background`) (spec §9, §7.1).

Each task runs `bash -c` in its own session (so its own process group) with stdin closed and
stdout+stderr appended to `tasks/<id>/output.log` in the session directory; its description
and status are kept beside it as JSON. A watcher per task — a task in the session's task
group (`attach`), not in the turn's — waits for the exit or the timeout, so cancelling a turn
leaves the command running. When a task ends, a notice is queued; the soul hands it to the
model at the start of its next step (and to the client as a `Notification` event). When the
session ends, `aclose()` (and, as a last resort, `close()`) kills every task's process group,
so no command outlives the engine. A job is a coroutine run in the session's task group under
its own cancel scope (TaskStop and the session's end cancel it), writing its output to the same
`output.log`; it ends `completed` when it returns and `failed` when it raises."""

from __future__ import annotations

import json
import os
import secrets
import signal
import string
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.abc

from soulwire.errors import SoulwireError
from soulwire.tools.builtin.process import group_alive, signal_group
from soulwire.tools.lifetime import ready_to_tie, tie_to_engine
from soulwire.wire.messages import Notification
from soulwire.wire.types import BackgroundTaskDisplayBlock

KIND = "bash"
RUNNING = "running"
TERMINAL = ("completed", "failed", "killed")
OUTPUT_FILE = "output.log"
SPEC_FILE = "spec.json"
RUNTIME_FILE = "runtime.json"
_ID_ALPHABET = string.ascii_lowercase + string.digits
_POLL_S = 0.02
_WATCH_POLL_MAX_S = 0.1


class BackgroundLimits(NamedTuple):
    """`[background]` settings that shape what the tools return (spec §8.2)."""

    max_running_tasks: int = 4
    read_max_bytes: int = 30_000
    notification_tail_lines: int = 20
    notification_tail_chars: int = 3_000
    kill_grace_s: float = 2.0
    keep_alive_on_exit: bool = False
    """Commands still running when the session ends are left running (jobs still end)."""


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class BackgroundTask:
    """One background command and what became of it."""

    id: str
    command: str
    description: str
    cwd: str
    timeout_s: int
    tool_call_id: str
    dir: Path
    created_at: float = field(default_factory=time.time)
    status: str = RUNNING
    pgid: int | None = None
    exit_code: int | None = None
    interrupted: bool = False
    timed_out: bool = False
    failure_reason: str | None = None
    finished_at: float | None = None
    ended: anyio.Event = field(default_factory=anyio.Event)
    stop_reason: str | None = None
    kind: str = KIND
    scope: anyio.CancelScope | None = None
    """A job's cancel scope (None for a command: its process group is signalled instead)."""

    @property
    def output_path(self) -> Path:
        return self.dir / OUTPUT_FILE

    @property
    def terminal_reason(self) -> str:
        return "timed_out" if self.timed_out else self.status

    @property
    def active(self) -> bool:
        return self.status == RUNNING

    def display(self) -> BackgroundTaskDisplayBlock:
        return BackgroundTaskDisplayBlock(
            task_id=self.id, kind=self.kind, status=self.status, description=self.description
        )

    def summary_lines(self) -> list[str]:
        """`key: value` lines the task tools show the model."""
        command = [f"command: {self.command}"] if self.command else []
        return [
            f"task_id: {self.id}",
            f"kind: {self.kind}",
            f"status: {self.status}",
            f"description: {self.description}",
            *command,
            *self.outcome_lines(),
        ]

    def outcome_lines(self) -> list[str]:
        """`exit_code` and `reason`, for the lines that exist yet."""
        lines: list[str] = []
        if self.exit_code is not None:
            lines.append(f"exit_code: {self.exit_code}")
        if self.failure_reason:
            lines.append(f"reason: {self.failure_reason}")
        return lines

    def output_size(self) -> int:
        try:
            return self.output_path.stat().st_size
        except OSError:
            return 0

    def read_tail(self, max_bytes: int) -> tuple[str, int, bool]:
        """(the last `max_bytes` of the output as text, bytes read, whether earlier output
        was left out)."""
        try:
            with open(self.output_path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                start = max(0, size - max_bytes)
                handle.seek(start)
                data = handle.read(max_bytes)
        except OSError:
            return "", 0, False
        return data.decode("utf-8", "replace"), len(data), start > 0

    def record(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "pgid": self.pgid,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "timed_out": self.timed_out,
            "failure_reason": self.failure_reason,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
        }


class TaskNotice(NamedTuple):
    """A finished task, told to the model (`text`) and to the client (`event`)."""

    text: str
    event: Notification


class TooManyTasks(SoulwireError):
    """`max_running_tasks` tasks are already running."""


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    try:
        temp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        os.replace(temp, path)
    except OSError:
        pass  # the status file is a record for later; the live task does not depend on it


def _new_id(taken: Mapping[str, Any], kind: str = KIND) -> str:
    while True:
        task_id = f"{kind}-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(8))
        if task_id not in taken:
            return task_id


class BackgroundTasks:
    """The session's background tasks: start, look up, stop, and notices of their ends."""

    def __init__(self, tasks_dir: Path, limits: BackgroundLimits | None = None) -> None:
        self.tasks_dir = tasks_dir
        self.limits = limits or BackgroundLimits()
        self._tasks: dict[str, BackgroundTask] = {}
        self._notices: list[TaskNotice] = []
        self._closed = False
        self._group: anyio.abc.TaskGroup | None = None

    def attach(self, group: anyio.abc.TaskGroup) -> None:
        """The session's task group: the tasks' watchers run in it, outliving turns."""
        self._group = group

    # -- starting -------------------------------------------------------------
    def start(
        self,
        command: str,
        *,
        description: str,
        cwd: Path,
        timeout_s: int,
        tool_call_id: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
    ) -> BackgroundTask:
        """Start `argv` (which runs `command`) as a new task. Raises TooManyTasks or OSError
        (also when the session is not running: there is nowhere to watch the task from)."""
        group = self._group
        if group is None or self._closed:
            raise OSError("background tasks need a running session")
        running = sum(1 for t in self._tasks.values() if t.active)
        if running >= self.limits.max_running_tasks:
            raise TooManyTasks(running)
        task_id = _new_id(self._tasks)
        task_dir = self.tasks_dir / task_id
        task_dir.mkdir(parents=True, exist_ok=True)
        task = BackgroundTask(
            id=task_id,
            command=command,
            description=description,
            cwd=str(cwd),
            timeout_s=timeout_s,
            tool_call_id=tool_call_id,
            dir=task_dir,
        )
        _write_json(
            task_dir / SPEC_FILE,
            {
                "id": task_id,
                "kind": KIND,
                "description": description,
                "command": command,
                "cwd": str(cwd),
                "timeout_s": timeout_s,
                "tool_call_id": tool_call_id,
                "created_at": task.created_at,
            },
        )
        if not self.limits.keep_alive_on_exit:
            env = ready_to_tie(env)
        with open(task.output_path, "ab") as output:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        # Left running at the end on purpose: then the engine's watchdog must not kill it.
        tie_to_engine(process.pid, watchdog=not self.limits.keep_alive_on_exit, env=env)
        task.pgid = process.pid
        self._tasks[task_id] = task
        _write_json(task_dir / RUNTIME_FILE, task.record())
        group.start_soon(self._watch, task, process, name=f"task-{task_id}")
        return task

    def start_job(
        self,
        job: Callable[[Path], Awaitable[None]],
        *,
        kind: str,
        description: str,
        timeout_s: int,
        tool_call_id: str,
    ) -> BackgroundTask:
        """Run `job(output_path)` as a task of `kind`. Raises TooManyTasks, or OSError when the
        session is not running."""
        group = self._group
        if group is None or self._closed:
            raise OSError("background tasks need a running session")
        running = sum(1 for t in self._tasks.values() if t.active)
        if running >= self.limits.max_running_tasks:
            raise TooManyTasks(running)
        task_id = _new_id(self._tasks, kind)
        task_dir = self.tasks_dir / task_id
        task_dir.mkdir(parents=True, exist_ok=True)
        task = BackgroundTask(
            id=task_id,
            command="",
            description=description,
            cwd="",
            timeout_s=timeout_s,
            tool_call_id=tool_call_id,
            dir=task_dir,
            kind=kind,
            scope=anyio.CancelScope(),
        )
        spec = {"id": task_id, "kind": kind, "description": description, "timeout_s": timeout_s}
        _write_json(
            task_dir / SPEC_FILE, {**spec, "tool_call_id": tool_call_id, "created_at": task.created_at}
        )
        task.output_path.touch()
        self._tasks[task_id] = task
        _write_json(task_dir / RUNTIME_FILE, task.record())
        group.start_soon(self._run_job, task, job, name=f"task-{task_id}")
        return task

    async def _run_job(self, task: BackgroundTask, job: Callable[[Path], Awaitable[None]]) -> None:
        assert task.scope is not None
        code = 0
        with task.scope:
            with anyio.move_on_after(task.timeout_s) as deadline:
                try:
                    await job(task.output_path)
                except Exception as exc:
                    code = 1
                    task.failure_reason = str(exc) or type(exc).__name__
            task.timed_out = deadline.cancelled_caught
        if task.scope.cancelled_caught and task.stop_reason is None:
            task.stop_reason = "Session ended"
        self._finish(task, code)

    async def _watch(self, task: BackgroundTask, process: subprocess.Popen[bytes]) -> None:
        """Wait for the task to end (killing it at its timeout) and record how it ended.
        Polls (backing off to 0.1 s) rather than blocking a thread on the child."""
        code: int | None = None
        try:
            with anyio.move_on_after(task.timeout_s) as deadline:
                code = await _exited(process)
            if deadline.cancelled_caught:
                task.timed_out = True
                await self._kill_group(task)
                code = await _exited(process)
        except anyio.get_cancelled_exc_class():
            # The session's group is going away: record an end that already happened; a
            # command still running is killed by `aclose` / `close`.
            code = process.poll()
            if code is not None:
                self._finish(task, code)
            raise
        self._finish(task, code)

    def _finish(self, task: BackgroundTask, code: int | None) -> None:
        if task.ended.is_set():
            return
        task.finished_at = time.time()
        task.exit_code = code if task.kind == KIND else None  # a job has no exit code
        if task.stop_reason is not None:
            task.status, task.interrupted = "killed", True
            task.failure_reason = task.stop_reason
        elif task.timed_out:
            task.status, task.interrupted = "failed", True
            what = "Command" if task.kind == KIND else "Task"
            task.failure_reason = f"{what} timed out after {task.timeout_s}s"
        elif code == 0:
            task.status = "completed"
        else:
            task.status = "failed"
            if task.kind == KIND or not task.failure_reason:
                task.failure_reason = _exit_reason(code)
        if not self._closed:
            self._notices.append(self._notice(task))
        # The status file is written after the notice is queued: whoever sees the end
        # there will find the notice at the next step.
        _write_json(task.dir / RUNTIME_FILE, task.record())
        task.ended.set()

    # -- looking up -----------------------------------------------------------
    def get(self, task_id: str) -> BackgroundTask | None:
        return self._tasks.get(task_id)

    def list(self, *, active_only: bool, limit: int) -> list[BackgroundTask]:
        tasks = self.running() if active_only else [*self._tasks.values()]
        return tasks[:limit]

    def running(self) -> list[BackgroundTask]:
        """The tasks still at work, oldest first."""
        return [t for t in self._tasks.values() if t.active]

    @property
    def has_notices(self) -> bool:
        """Whether some task ended since the last `take_notices` (its notice not yet taken)."""
        return bool(self._notices)

    async def wait_for_an_end(self) -> None:
        """Return once one of the running tasks has ended (at once when none is running)."""
        running = self.running()
        if not running:
            return
        async with anyio.create_task_group() as group:

            async def until_ended(task: BackgroundTask) -> None:
                await task.ended.wait()
                group.cancel_scope.cancel()

            for task in running:
                group.start_soon(until_ended, task)

    def take_notices(self) -> list[TaskNotice]:
        """The notices of tasks that ended since the last call, oldest first."""
        notices, self._notices = self._notices, []
        return notices

    # -- stopping -------------------------------------------------------------
    def request_stop(self, task: BackgroundTask, reason: str) -> None:
        """Kill the task's process group (SIGTERM, SIGKILL after the grace period) without
        waiting; the watcher records the end."""
        if not task.active:
            return
        task.stop_reason = reason
        if task.scope is not None:
            task.scope.cancel()
        elif self._group is not None:
            self._group.start_soon(self._kill_group, task, name=f"stop-{task.id}")

    async def _kill_group(self, task: BackgroundTask) -> None:
        pgid = task.pgid
        if pgid is None:
            return
        signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(self.limits.kill_grace_s):
            while group_alive(pgid):
                await anyio.sleep(_POLL_S)
        signal_group(pgid, signal.SIGKILL)

    def outliving(self) -> list[BackgroundTask]:
        """The running tasks the session's end leaves running (`keep_alive_on_exit`)."""
        if not self.limits.keep_alive_on_exit:
            return []
        return [t for t in self.running() if t.scope is None]

    def ending_with_session(self) -> list[BackgroundTask]:
        """The running tasks the session's end stops (all of them, unless some outlive it)."""
        kept = self.outliving()
        return [t for t in self.running() if t not in kept]

    def _stopping(self, reason: str) -> list[int]:
        """Mark the session's end; the process groups still to kill."""
        self._closed = True
        kept = self.outliving()
        for task in kept:  # its record says so: no watcher will write its end
            _write_json(task.dir / RUNTIME_FILE, {**task.record(), "left_running_at": time.time()})
        tasks = [t for t in self._tasks.values() if t not in kept]
        for task in tasks:
            if task.active:
                task.stop_reason = reason
                if task.scope is not None:
                    task.scope.cancel()
        return [t.pgid for t in tasks if t.pgid is not None and group_alive(t.pgid)]

    async def aclose(self, reason: str = "Session ended") -> None:
        """Kill every task's process group (SIGTERM, SIGKILL after the grace period) and let
        the watchers record the ends. Called while the session's task group still runs."""
        groups = self._stopping(reason)
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(self.limits.kill_grace_s):
            while any(group_alive(p) for p in groups):
                await anyio.sleep(_POLL_S)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)
        kept = set(self.outliving())
        with anyio.move_on_after(1.0):  # the watchers write the final status
            for task in list(self._tasks.values()):
                if task not in kept:
                    await task.ended.wait()

    def close(self, reason: str = "Session ended") -> None:
        """The last resort, outside any event loop: kill what is left, boundedly."""
        groups = self._stopping(reason)
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.limits.kill_grace_s
        while any(group_alive(p) for p in groups) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)

    # -- notices --------------------------------------------------------------
    def _notice(self, task: BackgroundTask) -> TaskNotice:
        verb, severity = {
            "completed": ("completed", "success"),
            "killed": ("stopped", "warning"),
            "timed_out": ("timed out", "error"),
        }.get(task.terminal_reason, ("failed", "error"))
        finished = task.finished_at or time.time()
        duration = finished - task.created_at
        when = "Completed at" if task.status == "completed" else "Finished at"
        stamp = datetime.fromtimestamp(finished).strftime("%Y-%m-%d %H:%M:%S")
        body = [
            f"Task ID: {task.id}",
            f"Status: {task.status} ({when}: {stamp}, Duration: {_duration(duration)})",
            f"Description: {task.description}",
        ]
        if task.timed_out:
            body.append("Terminal reason: timed_out")
        if task.exit_code is not None:
            body.append(f"Exit code: {task.exit_code}")
        if task.failure_reason:
            body.append(f"Failure reason: {task.failure_reason}")
        notice_id = "n" + secrets.token_hex(4)
        title = f"Background task {verb}: {task.description}"
        event = Notification(
            id=notice_id,
            category="task",
            type=f"task.{task.terminal_reason}",
            source_kind="background_task",
            source_id=task.id,
            title=title,
            body="\n".join(body),
            severity=severity,
            created_at=time.time(),
            payload={
                "task_id": task.id,
                "task_kind": task.kind,
                "status": task.status,
                "description": task.description,
                "exit_code": task.exit_code,
                "interrupted": task.interrupted,
                "timed_out": task.timed_out,
                "terminal_reason": task.terminal_reason,
                "failure_reason": task.failure_reason,
                "finished_at": finished,
                "duration_s": duration,
            },
        )
        details = [
            f"Task ID: {task.id}",
            f"Task Type: {task.kind}",
            f"Description: {task.description}",
            f"Status: {task.status}",
        ]
        if task.exit_code is not None:
            details.append(f"Exit code: {task.exit_code}")
        tail = self._notice_tail(task)
        if tail:
            details += ["Output tail:", tail]
        text = "\n".join(
            [
                f'<notification id="{notice_id}" category="task" type="{event.type}" '
                f'source_kind="background_task" source_id="{task.id}">',
                f"Title: {title}",
                f"Severity: {severity}",
                *body,
                "<task-notification>",
                *details,
                "</task-notification>",
                "</notification>",
            ]
        )
        return TaskNotice(text=text, event=event)

    def _notice_tail(self, task: BackgroundTask) -> str:
        limits = self.limits
        text, _, _ = task.read_tail(limits.notification_tail_chars * 4)
        lines = text.rstrip("\n").splitlines()[-limits.notification_tail_lines :]
        return "\n".join(lines)[-limits.notification_tail_chars :]


async def _exited(process: subprocess.Popen[bytes]) -> int:
    """The child's exit code, once it has exited (polling, backing off to 0.1 s)."""
    delay = _POLL_S / 4
    while (code := process.poll()) is None:
        await anyio.sleep(delay)
        delay = min(delay * 1.5, _WATCH_POLL_MAX_S)
    return code


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"Command was terminated by {signal.Signals(-code).name}"
        except ValueError:
            return f"Command was terminated by signal {-code}"
    return f"Command failed with exit code {code}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "<1s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"
