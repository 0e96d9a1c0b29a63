"""The local backend: each task is a `soulwire.sdk.Session` (an engine child process) in a
private copy of its workspace, then its check command, then the workspace diff."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from pydantic import BaseModel, ConfigDict

import soulwire.sdk as sdk
from soulwire.fleet.backend import EngineSettings, TurnSlot
from soulwire.fleet.policy import decide
from soulwire.fleet.rerun import RerunError
from soulwire.fleet.results import (
    CheckOutcome,
    EngineLostError,
    EngineStartError,
    TaskResult,
    Usage,
    task_cost,
)
from soulwire.fleet.runlock import fleet_outputs
from soulwire.fleet.tasks import Task
from soulwire.fleet.tools import ExternalTool, run_external_tool
from soulwire.fleet.workspace import WorkspaceError, prepare_workspace, workspace_diff

OUTPUT_TAIL_CHARS = 4000
SESSION_FILE = "session"
"""In a task's directory while its turn runs: the session's id. Left behind by a run that was
interrupted (Ctrl-C, a killed driver), it makes the next run continue that session."""
RESUME_PROMPT = (
    "The previous run of this task was interrupted before it finished. Continue from where it "
    "stopped (the workspace is as it was left).\n\nThe task:\n\n{prompt}"
)


def interrupted_session(task_dir: Path, work_dir: Path) -> str | None:
    """The session an interrupted run of the task left, if its workspace is still there."""
    try:
        session_id = (task_dir / SESSION_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return session_id if session_id and work_dir.is_dir() else None


def note_session(task_dir: Path, session_id: str | None) -> None:
    """Record (or, with None, forget) the session of the task's running turn."""
    path = task_dir / SESSION_FILE
    try:
        if session_id is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(session_id, encoding="utf-8")
    except OSError:
        pass  # (resuming is a convenience: without the note, the next run starts afresh)


def turn_prompt(task: Task, resumed: bool) -> str:
    """The task's prompt; for a run that continues an interrupted one, saying so."""
    return RESUME_PROMPT.format(prompt=task.prompt) if resumed else task.prompt


class _AnyArguments(BaseModel):
    """External tools' arguments as the model sent them (the engine checked the schema)."""

    model_config = ConfigDict(extra="allow")


class LocalBackend:
    """Runs tasks on this machine (concurrency is the driver's limiter)."""

    name = "local"
    stages = True
    """Workspaces are copied and sessions opened before the task's place in the fleet is
    free (see `TurnSlot`): the place is taken at the prompt."""

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()
        self._disk: anyio.CapacityLimiter | None = None
        self._forking: anyio.Lock | None = None
        """Forks of earlier sessions one at a time: two tasks starting from the same session
        would each need it open (a session is open in one engine at a time)."""

    @property
    def disk_limiter(self) -> anyio.CapacityLimiter:
        """The worker threads that copy and diff workspaces: two, not one per running task. Fifty
        copies on fifty threads spent more CPU passing the GIL around than copying files."""
        if self._disk is None:  # made on first use: a limiter belongs to the running event loop
            self._disk = anyio.CapacityLimiter(2)
        return self._disk

    def options(self, task: Task, work_dir: Path) -> sdk.Options:
        """The SDK options of a task's session."""
        s = self.settings
        policy = task.approval

        def on_approval(approval: sdk.Approval) -> str:
            request = approval.request
            return decide(policy, request.sender, request.action, request.description)

        return sdk.Options(
            executable=s.executable,
            work_dir=work_dir,
            config=task.config,
            config_file=task.config_file,
            share_dir=s.share_dir,
            env={**s.env, **task.env},
            inherit_env=s.inherit_env,
            tools=self.external_tools(task, work_dir),
            budget=task.budget,
            prices=s.prices,  # the engine prices the task's budget with the run's prices too
            on_approval=on_approval,
            approval_default="reject",
            startup_timeout=s.startup_timeout,
            close_timeout=s.close_timeout,
            client_name="soulwire-fleet",
            **vars(task.session_settings()),
        )

    def tool_env(self, task: Task) -> dict[str, str]:
        """The environment of the task's check and external tools."""
        return self.settings.environ(task.env)

    def external_tools(self, task: Task, work_dir: Path) -> list[sdk.Tool]:
        """The task's external tools as SDK tools (the SDK answers their calls)."""
        env = self.tool_env(task)

        def make(spec: ExternalTool) -> sdk.Tool:
            async def handler(arguments: _AnyArguments) -> Any:
                return await run_external_tool(spec, arguments.model_dump_json(), work_dir, env)

            return sdk.Tool(
                handler,
                name=spec.name,
                description=spec.description,
                arguments_model=_AnyArguments,
                single_model=True,
                parameters=spec.parameters,
            )

        return [make(spec) for spec in task.tools]

    async def run_task(
        self, task: Task, task_dir: Path, record: TaskResult, slot: TurnSlot | None = None
    ) -> TaskResult:
        work_dir = task_dir / "workspace"
        result = record
        result.work_dir = str(work_dir)
        mode = task.workspace_mode
        attempts = 1 + max(0, self.settings.retries)
        earlier = record.attempts - 1  # runs before this call (a Ray worker that died)
        resume = interrupted_session(task_dir, work_dir)
        own = fleet_outputs(task_dir.parent)  # (a workspace "." beside the task file holds them)
        attempt = 0
        while attempt < attempts:
            attempt += 1
            result.attempts = earlier + attempt
            resumed = resume is not None
            if resume is None:
                try:
                    resume = await self._workspace(task, work_dir, own, result)
                except (WorkspaceError, RerunError, OSError) as exc:
                    result.status, result.reason = "failed", f"workspace: {one_line(exc)}"
                    if slot is not None:
                        await slot.take()
                    return _finish(result)
            result.status, result.reason, result.session_id = "done", None, None
            result.resumed = resumed
            try:
                await self._agent(task, work_dir, result, slot, task_dir, resume)
            except EngineLostError as exc:  # the engine died under the task: run it again
                result.status, result.reason = "failed", f"EngineLostError: {one_line(exc)}"
                resume = None
                if attempt < attempts:
                    continue
            except (sdk.SDKError, EngineStartError) as exc:
                result.status, result.reason = "failed", f"{type(exc).__name__}: {one_line(exc)}"
                if resume is not None and result.session_id is None:  # it could not be opened
                    resume, attempt = None, attempt - 1  # (not a run: start afresh)
                    continue
            break
        # It ended (a cancelled run never gets here: it resumes); so did one a budget stopped,
        # but a later run with more budget continues its session (the run total's `cancelled`).
        note_session(task_dir, result.session_id if result.reason == "budget_exceeded" else None)
        if slot is not None:  # (taken at the prompt, unless the session never got there)
            await slot.take()
        if task.check is not None and result.status != "cancelled":
            result.check = await run_check(task.check, work_dir, self.tool_env(task), task.check_time_limit)
            result.passed = result.status == "done" and result.check.passed
        try:
            diff = await anyio.to_thread.run_sync(
                workspace_diff, task.workspace, work_dir, mode, own, limiter=self.disk_limiter
            )
            result.diff, result.diff_truncated = diff
        except WorkspaceError as exc:
            result.diff = f"[no diff: {one_line(exc)}]"
        share = self.settings.engine_share_dir(task.env)
        # An ACP agent that reports no usage (`kimi acp` does not) has an unknown cost, not $0.
        unreported = isinstance(task.agent, list) and result.usage == Usage()
        result.cost_usd = None if unreported else task_cost(task, result.usage, self.settings.prices, share)
        return _finish(result)

    async def _workspace(self, task: Task, work_dir: Path, own: Any, result: TaskResult) -> str | None:
        """The task's fresh workspace: a copy of its source, or (`from_checkpoint`) a fork of
        an earlier run's session at a checkpoint, whose id is returned (the turn runs in it)."""
        if task.from_checkpoint is None:
            mode = task.workspace_mode
            await anyio.to_thread.run_sync(
                prepare_workspace, task.workspace, work_dir, mode, own, limiter=self.disk_limiter
            )
            return None
        from soulwire.fleet.rerun import fork_into

        if self._forking is None:
            self._forking = anyio.Lock()
        async with self._forking:
            session_id, result.from_checkpoint = await fork_into(
                self.options(task, work_dir), task.from_checkpoint, work_dir
            )
        return session_id

    async def _agent(
        self,
        task: Task,
        work_dir: Path,
        result: TaskResult,
        slot: TurnSlot | None,
        task_dir: Path,
        resume: str | None = None,
    ) -> None:
        """The session (`resume`: that earlier one) and its one turn, filling `result` (status,
        message, usage, steps); `slot` is taken once the session is open, before the prompt."""
        if not isinstance(task.agent, str):  # another ACP agent does the task
            from soulwire.fleet.acp_agent import run_acp_task

            await run_acp_task(task, work_dir, result, slot, self.settings.environ(task.env))
            return
        options = self.options(task, work_dir)
        if resume is not None:
            options.session_id = resume
        async with sdk.Session(options) as session:
            result.session_id = session.id
            if slot is not None:
                await slot.take()
            note_session(task_dir, session.id)
            turn = session.prompt(turn_prompt(task, result.resumed))
            try:
                # The hard limit covers a turn that does not end after `cancel`: leaving the
                # session then kills the engine's process group.
                with anyio.move_on_after(task.time_limit + self.settings.cancel_grace):
                    with anyio.move_on_after(task.time_limit) as soft:
                        try:
                            await turn
                        except sdk.SDKError:
                            pass  # kept in turn.error, reported by _record_turn
                    if soft.cancelled_caught:
                        result.status, result.reason = "timed_out", f"time limit {task.time_limit:g}s"
                if not turn.finished:
                    result.status = "timed_out"
                    result.reason = f"time limit {task.time_limit:g}s; the engine did not stop and was killed"
            finally:  # also when the fleet is interrupted: the cancelled line keeps the steps
                _record_turn(turn, result)
            result.checkpoint = await _last_checkpoint(session)
            if result.status == "failed" and isinstance(turn.error, sdk.EngineExitedError):
                raise EngineLostError(str(turn.error))


async def _last_checkpoint(session: sdk.Session) -> str | None:
    """The id of the session's last checkpoint (None: it takes none)."""
    hello = session.initialize_result or {}
    if not (hello.get("capabilities") or {}).get("supports_checkpoints"):
        return None
    try:
        records = await session.checkpoints()
    except sdk.SDKError:
        return None
    taken = [r for r in records if r.get("type", "checkpoint") == "checkpoint"]
    return str(taken[-1]["id"]) if taken else None


def _finish(result: TaskResult) -> TaskResult:
    result.finished_at = time.time()
    if result.started_at is None:
        result.started_at = result.finished_at
    result.duration_s = round(result.finished_at - result.started_at, 3)
    return result


def _record_turn(turn: sdk.Turn, result: TaskResult) -> None:
    steps = turn.steps
    result.steps = len([s for s in steps if s.n > 0])
    usage = turn.usage
    result.usage = Usage(
        input_other=usage.input_other,
        output=usage.output,
        input_cache_read=usage.input_cache_read,
        input_cache_creation=usage.input_cache_creation,
    )
    result.final_message = next((s.text for s in reversed(steps) if s.text), "")
    if result.status != "done" or not turn.finished:
        return
    if turn.error is not None:
        result.status, result.reason = "failed", f"{type(turn.error).__name__}: {one_line(turn.error)}"
        return
    status: str = turn.status or ""
    if status == "max_steps_reached":
        result.status, result.reason = "failed", "max_steps_reached"
    elif status == "budget_exceeded":
        result.status, result.reason = "failed", "budget_exceeded"
    elif status == "cancelled":
        result.status, result.reason = "cancelled", "the turn was cancelled"
    elif status != "finished":
        result.status, result.reason = "failed", f"turn ended: {status}"


def one_line(exc: BaseException | str) -> str:
    """An error as one line of at most 500 characters (for a result's reason)."""
    text = " ".join(str(exc).split())
    return text[:500]


async def run_check(command: str, cwd: Path, env: dict[str, str], time_limit: float) -> CheckOutcome:
    """Run `command` with the shell in `cwd`; stdout and stderr together, the tail kept. Past
    `time_limit` its whole process group is killed (exit_code None)."""
    started = time.monotonic()
    tail = bytearray()
    process: Process = await anyio.open_process(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    exit_code: int | None = None
    try:
        with anyio.move_on_after(time_limit):
            assert process.stdout is not None
            async for chunk in process.stdout:
                tail += chunk
                del tail[: max(0, len(tail) - OUTPUT_TAIL_CHARS * 4)]
            exit_code = await process.wait()
    finally:
        if exit_code is None:
            _kill_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
    text = tail.decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]
    if exit_code is None:
        text += f"\n[check killed after {time_limit:g}s]"
    return CheckOutcome(
        exit_code=exit_code,
        passed=exit_code == 0,
        output_tail=text,
        duration_s=round(time.monotonic() - started, 3),
    )


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = ["LocalBackend", "run_check"]
