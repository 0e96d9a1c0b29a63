"""The task file: one JSON object per line, each a `Task` (what to ask, where, with which
model and limits, and the check that judges the result). Errors name the line."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soulwire.fleet.policy import ApprovalRules
from soulwire.fleet.tools import ExternalTool

Approval = Literal["yolo", "approve", "reject"]
"""`yolo`: the engine runs tools without asking; `approve`/`reject`: every request gets that answer."""


class TaskFileError(ValueError):
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
    sandbox: Literal["off", "read-only", "workspace-write"] | None = None
    """`--sandbox` of the task's engine: Shell and file tools confined (None: the config's)."""
    sandbox_network: bool | None = None
    """`--sandbox-network`: network inside the sandbox (None: the config's, default off)."""
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

    @model_validator(mode="after")
    def _one_config(self) -> Task:
        if self.config is not None and self.config_file is not None:
            raise ValueError("config and config_file cannot be combined")
        if self.workspace_mode == "worktree" and self.workspace is None:
            raise ValueError("workspace_mode worktree needs a workspace (a git repository)")
        return self

    def resolved(self, base: Path) -> Task:
        """The task with its relative paths made absolute against `base`."""
        updates: dict[str, Path] = {}
        for name in ("workspace", "config_file"):
            path: Path | None = getattr(self, name)
            if path is not None:
                updates[name] = (base / path.expanduser()).absolute()
        return self.model_copy(update=updates) if updates else self


def _union_tag(part: str) -> bool:
    return "[" in part or part[:1].isupper()


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    # A union's member tags (`literal['yolo',…]`, `ApprovalRules`) are not field names.
    parts = [str(part) for part in error["loc"]]
    where = ".".join(part for i, part in enumerate(parts) if i == 0 or not _union_tag(part))
    message = error["msg"]
    return f"{where}: {message}" if where else message


def parse_tasks(lines: Iterable[str], *, origin: str = "<tasks>", base: Path | None = None) -> list[Task]:
    """Tasks from JSON lines (blank lines and lines starting with `#` are skipped).

    Raises TaskFileError with `origin:LINE: problem` for the first bad line, a duplicate id or
    a workspace that is not a directory."""
    tasks: list[Task] = []
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


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a JSONL file; relative paths in it are relative to the file's directory."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{file}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_tasks(text.splitlines(), origin=str(file), base=file.absolute().parent)


__all__ = ["Approval", "Task", "TaskFileError", "load_tasks", "parse_tasks"]
