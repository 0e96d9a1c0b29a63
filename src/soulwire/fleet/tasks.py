"""The task file: one JSON object per line, each a `Task` (what to ask, where, with which
model and limits, and the check that judges the result). Errors name the line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soulwire.fleet.budget import RunSettings
from soulwire.fleet.errors import FleetError
from soulwire.fleet.policy import ApprovalRules
from soulwire.fleet.tools import ExternalTool
from soulwire.wire.budget import Budget
from soulwire.wire.session_settings import SandboxMode, SessionSettings

Approval = Literal["yolo", "approve", "reject"]
"""`yolo`: the engine runs tools without asking; `approve`/`reject`: every request gets that answer."""


class TaskFileError(FleetError, ValueError):
    """The task file cannot be used; the message is one line naming the file and line."""


class Task(BaseModel):
    """One agent session of a fleet. Relative paths are relative to the task file's directory."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Unique in the file; names the task's directory in the run dir and its result line."""
    prompt: str = Field(min_length=1)
    workspace: Path | None = None
    """A directory copied into the run dir for this task alone (None: an empty directory)."""
    workspace_mode: Literal["copy", "worktree"] = "copy"
    """`worktree`: a detached git worktree of the workspace repository's HEAD instead of a copy
    (fast for big repositories; uncommitted and untracked files are not in it)."""
    model: str | None = None
    config: dict[str, Any] | None = None
    """A whole engine configuration (kimi's format) instead of the engine's config.toml."""
    config_file: Path | None = None
    approval: Approval | ApprovalRules = "reject"
    """A fixed answer to every approval request, or rules as data (see `fleet.policy`)."""
    sandbox: SandboxMode | None = None
    """`--sandbox` of the task's engine: Shell and file tools confined (None: the config's)."""
    sandbox_network: bool | None = None
    """`--sandbox-network`: network inside the sandbox (None: the config's, default off)."""
    overlay: Literal["off", "commit", "discard"] | None = None
    """`--overlay` of the task's engine (with `sandbox: workspace-write`): the turn's writes land
    in an overlay, then are committed to the workspace as the turn ends or thrown away (a dry
    run whose pending changes nobody sees; `ask` has nobody to ask in a fleet). None: the config's."""
    thinking: bool | None = None
    max_steps: int | None = Field(default=None, ge=1)
    time_limit: float = Field(default=1800.0, gt=0)
    """Seconds for the agent's turn; past it the turn is cancelled and the task is `timed_out`."""
    check: str | None = None
    """A shell command run in the workspace after the turn; exit code 0 passes."""
    check_time_limit: float = Field(default=600.0, gt=0)
    tools: list[ExternalTool] = Field(default_factory=lambda: list[ExternalTool]())
    """External tools the model may call: commands run in the workspace (`fleet.tools`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables added to the engine's (and the check's) environment."""
    budget: Budget | None = None
    """Limits the task's engine enforces (`{"tree": {"usd": 0.5}}`, as `[budgets]`), over the
    `--budget-*` flags of `fleet run`; a task stopped by one is `failed`, reason `budget_exceeded`."""
    checkpoints: bool | None = None
    """`--checkpoints` of the task's engine (None: the config's): its result then names its
    last checkpoint, from which a later run can start the task again (`from_checkpoint`)."""
    from_checkpoint: str | None = Field(default=None, pattern=r"^.+/[^/@]+(@[^/@]+)?$")
    """`RUN/TASK@CKPT`: start from checkpoint CKPT of task TASK of an earlier run (RUN: its
    results file, or its run dir) instead of a fresh workspace — the files it recorded and the
    conversation before it; without `@CKPT`, that task's last checkpoint."""
    agent: Literal["soulwire"] | list[str] = "soulwire"
    """Who does the task: `soulwire` (the engine, through the SDK), or the argv of any ACP agent
    (`["kimi", "acp"]`), driven over ACP in the same workspace (`fleet.acp_agent`)."""

    @property
    def agent_label(self) -> str:
        """The agent as the report names it."""
        return self.agent if isinstance(self.agent, str) else " ".join(self.agent)

    @model_validator(mode="after")
    def _one_config(self) -> Task:
        if self.config is not None and self.config_file is not None:
            raise ValueError("config and config_file cannot be combined")
        if isinstance(self.agent, list) and (not self.agent or not all(self.agent)):
            raise ValueError("agent must be `soulwire` or the command of an ACP agent (a list of words)")
        if self.workspace_mode == "worktree" and self.workspace is None:
            raise ValueError("workspace_mode worktree needs a workspace (a git repository)")
        return self

    def session_settings(self) -> SessionSettings:
        """The settings of the task's session (its engine's flags, its SDK options)."""
        from soulwire.fleet.spawn import task_session_settings

        return task_session_settings(dict(self))

    def resolved(self, base: Path) -> Task:
        """The task with its relative paths made absolute against `base`."""
        updates: dict[str, Path] = {}
        for name in ("workspace", "config_file"):
            path: Path | None = getattr(self, name)
            if path is not None:
                updates[name] = (base / path.expanduser()).absolute()
        rerun: dict[str, str] = {}
        if self.from_checkpoint is not None and not os.path.isabs(self.from_checkpoint):
            rerun["from_checkpoint"] = str((base / os.path.expanduser(self.from_checkpoint)).absolute())
        return self.model_copy(update={**updates, **rerun}) if updates or rerun else self


def _union_tag(part: str) -> bool:
    return "[" in part or part[:1].isupper()


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    # A union's member tags (`literal['yolo',…]`, `ApprovalRules`) are not field names.
    parts = [str(part) for part in error["loc"]]
    where = ".".join(part for i, part in enumerate(parts) if i == 0 or not _union_tag(part))
    message = error["msg"]
    return f"{where}: {message}" if where else message


class TaskFile(list[Task]):
    """A task file's tasks, and its run-wide settings (`run`: the `{"fleet": {…}}` line)."""

    run: RunSettings = RunSettings()


def parse_tasks(lines: Iterable[str], *, origin: str = "<tasks>", base: Path | None = None) -> TaskFile:
    """Tasks from JSON lines (blank lines and lines starting with `#` are skipped); one line may
    instead be `{"fleet": {"budget": {…}}}`, the run's settings (`TaskFile.run`).

    Raises TaskFileError with `origin:LINE: problem` for the first bad line, a duplicate id or
    a workspace that is not a directory."""
    tasks = TaskFile()
    run_line: int | None = None
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{origin}:{number}: not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(raw, dict):
            raise TaskFileError(f"{origin}:{number}: a task must be a JSON object")
        if set(raw) == {"fleet"}:
            if run_line is not None:
                raise TaskFileError(f"{origin}:{number}: a second fleet line (the first is line {run_line})")
            if not isinstance(raw["fleet"], dict):
                raise TaskFileError(f"{origin}:{number}: fleet must be a JSON object")
            try:
                tasks.run = RunSettings.model_validate(raw["fleet"])
            except ValidationError as exc:
                raise TaskFileError(f"{origin}:{number}: fleet.{_first_error(exc)}") from None
            run_line = number
            continue
        try:
            task = Task.model_validate(raw)
        except ValidationError as exc:
            raise TaskFileError(f"{origin}:{number}: {_first_error(exc)}") from None
        if task.id in seen:
            first = seen[task.id]
            raise TaskFileError(f"{origin}:{number}: duplicate id {task.id!r} (first on line {first})")
        seen[task.id] = number
        if base is not None:
            task = task.resolved(base)
        if task.workspace is not None and not task.workspace.is_dir():
            raise TaskFileError(f"{origin}:{number}: workspace is not a directory: {task.workspace}")
        if task.config_file is not None and not task.config_file.is_file():
            raise TaskFileError(f"{origin}:{number}: config_file does not exist: {task.config_file}")
        tasks.append(task)
    return tasks


def load_tasks(path: str | Path) -> TaskFile:
    """Tasks from a JSONL file; relative paths in it are relative to the file's directory."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{file}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_tasks(text.splitlines(), origin=str(file), base=file.absolute().parent)


__all__ = ["Approval", "Task", "TaskFile", "TaskFileError", "load_tasks", "parse_tasks"]
