"""`TaskList`, `TaskOutput`, `TaskStop`: the model's view of its background tasks (spec §9)."""

from __future__ import annotations

import anyio
from pydantic import Field

from soulwire.tools.base import ActionRequest, ToolContext, ToolParams, TypedTool, refused
from soulwire.tools.builtin.background import BackgroundTask, BackgroundTasks
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

STOP_TASK = "stop background task"
_WAIT_POLL_S = 0.05
_READ_LINES_HINT = 300


def _not_found(task_id: str) -> ToolReturnValue:
    return tool_error(f"Task not found: {task_id}", brief="Task not found")


class TaskListParams(ToolParams):
    active_only: bool = Field(default=True, description="List only the tasks that are still running.")
    limit: int = Field(default=20, ge=1, le=100, description="At most this many tasks.")


class TaskList(TypedTool[TaskListParams]):
    name = "TaskList"
    description = (
        "List the background tasks of this session (started with Shell run_in_background): "
        "their ids, status, description and command."
    )
    params = TaskListParams

    def __init__(self, tasks: BackgroundTasks) -> None:
        self._tasks = tasks

    async def execute(self, params: TaskListParams, ctx: ToolContext) -> ToolReturnValue:
        found = self._tasks.list(active_only=params.active_only, limit=params.limit)
        heading = "active_background_tasks" if params.active_only else "background_tasks"
        blocks = [f"{heading}: {len(found)}"]
        if not found:
            blocks.append("[no tasks]")
            output = "\n".join(blocks)
        else:
            blocks += ["\n".join([f"[{i}]", *t.summary_lines()]) for i, t in enumerate(found, 1)]
            output = "\n\n".join(blocks)
        value = tool_ok(output=output, message="Task list retrieved.")
        value.display = [t.display() for t in found]
        return value


class TaskOutputParams(ToolParams):
    task_id: str = Field(description="The id of the background task.")
    block: bool = Field(
        default=False, description="Wait for the task to finish (at most `timeout` seconds) before answering."
    )
    timeout: int = Field(default=30, ge=0, le=3600, description="Seconds to wait when `block` is true.")


class TaskOutput(TypedTool[TaskOutputParams]):
    name = "TaskOutput"
    description = (
        "Get a snapshot of a background task: its status and the end of its output. "
        "Set block=true only when you mean to wait for the task to finish."
    )
    params = TaskOutputParams

    def __init__(self, tasks: BackgroundTasks) -> None:
        self._tasks = tasks

    async def execute(self, params: TaskOutputParams, ctx: ToolContext) -> ToolReturnValue:
        task = self._tasks.get(params.task_id)
        if task is None:
            return _not_found(params.task_id)
        waited_out = False
        if params.block and task.active:
            with anyio.move_on_after(params.timeout) as scope:
                while not task.ended.is_set():
                    await anyio.sleep(_WAIT_POLL_S)
            waited_out = scope.cancelled_caught
        if task.active:
            retrieval, message = ("timeout" if waited_out else "not_ready"), "Task snapshot retrieved."
        else:
            retrieval, message = "success", "Task output retrieved."
        value = tool_ok(output=self._snapshot(task, retrieval), message=message)
        value.display = [task.display()]
        return value

    def _snapshot(self, task: BackgroundTask, retrieval: str) -> str:
        lines = [f"retrieval_status: {retrieval}", *task.summary_lines()[:5]]
        lines += [
            f"interrupted: {str(task.interrupted).lower()}",
            f"timed_out: {str(task.timed_out).lower()}",
            f"terminal_reason: {task.terminal_reason}",
            *task.outcome_lines(),
        ]
        size = task.output_size()
        text, preview, truncated = task.read_tail(self._tasks.limits.read_max_bytes)
        path = task.output_path
        lines += [
            "",
            f"output_path: {path}",
            f"output_size_bytes: {size}",
            f"output_preview_bytes: {preview}",
            f"output_truncated: {str(truncated).lower()}",
            "",
            f"full_output_available: {str(size > 0).lower()}",
            "full_output_tool: ReadFile",
        ]
        if size > 0:
            lines.append(
                f'full_output_hint: Use ReadFile(path="{path}", line_offset=1, n_lines={_READ_LINES_HINT}) '
                "to inspect the full log. Increase line_offset to continue paging through the file."
            )
        else:
            lines.append("full_output_hint: No output file is currently available for this task.")
        lines += ["", "[output]", text.rstrip("\n") if text else "[no output available]"]
        return "\n".join(lines)


class TaskStopParams(ToolParams):
    task_id: str = Field(description="The id of the background task to stop.")
    reason: str = Field(default="Stopped by TaskStop", description="Why the task is stopped.")


class TaskStop(TypedTool[TaskStopParams]):
    name = "TaskStop"
    description = (
        "Stop a background task: its command and every process it started are killed. "
        "Use it only when the task must be cancelled. Needs the user's approval."
    )
    params = TaskStopParams

    def __init__(self, tasks: BackgroundTasks) -> None:
        self._tasks = tasks

    async def execute(self, params: TaskStopParams, ctx: ToolContext) -> ToolReturnValue:
        if ctx.state.get("plan_mode"):
            return tool_error(
                "Plan mode is on: background tasks cannot be stopped until the user approves the plan.",
                brief="Blocked in plan mode",
            )
        task = self._tasks.get(params.task_id)
        if task is None:
            return _not_found(params.task_id)
        refusal = await refused(
            ctx,
            ActionRequest(
                tool_call_id=ctx.tool_call_id,
                sender=self.name,
                action=STOP_TASK,
                description=f"Stop background task `{task.id}`",
                display=[task.display()],
                scope_key=task.id,
                confined=ctx.sandbox is not None and ctx.sandbox.active,  # stopping harms nothing
            ),
        )
        if refusal is not None:
            return refusal
        self._tasks.request_stop(task, params.reason)
        value = tool_ok(output="\n".join(task.summary_lines()), message="Task stop requested.")
        value.display = [task.display()]
        return value
