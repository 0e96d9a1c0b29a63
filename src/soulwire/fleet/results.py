"""Result lines: one JSON object per task as it finishes, appended (and flushed to disk) to
the results file, which is also what a later run reads to skip the tasks already finished."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soulwire.config.loader import ConfigError, read_config_file
from soulwire.fleet.errors import EngineLostError, EngineStartError
from soulwire.fleet.tasks import Task
from soulwire.sdk.pricing import ModelPrice, parse_prices, price_for
from soulwire.wire.types import TokenUsage

Status = Literal["done", "failed", "timed_out", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "timed_out"})
"""Statuses a re-run skips; a `cancelled` task (Ctrl-C) runs again, and so does a task its own
budget stopped (`failed`, `budget_exceeded`): it continues its session."""


class CheckOutcome(BaseModel):
    """What the task's check command said."""

    exit_code: int | None
    """None when it was killed at its time limit."""
    passed: bool
    output_tail: str = ""
    duration_s: float = 0.0


class Usage(BaseModel):
    """Tokens of the task's turn, as the engine reported them."""

    input_other: int = 0
    output: int = 0
    input_cache_read: int = 0
    input_cache_creation: int = 0


class TaskResult(BaseModel):
    """One result line."""

    model_config = ConfigDict(extra="allow")

    id: str
    status: Status
    reason: str | None = None
    """Why a task failed or stopped: `max_steps_reached`, `engine_error: …`, `time_limit`, …"""
    final_message: str = ""
    check: CheckOutcome | None = None
    passed: bool | None = None
    """The check's verdict (None without a check): done and the check passed."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens of the task's turn; a task that continued its session (`resumed`): with its
    earlier runs' (as the last line before said them)."""
    steps: int = 0
    duration_s: float = 0.0
    session_id: str | None = None
    work_dir: str | None = None
    """The task's workspace: `soulwire --work-dir WORK_DIR --session SESSION_ID` opens it."""
    cost_usd: float | None = None
    """Usage times the model's price (`soulwire.sdk.pricing`); None for a model without one."""
    node: str | None = None
    """The machine that ran the task (Ray backend), else None (this one)."""
    attempts: int = 1
    """Runs of the task: more than 1 when its engine (or Ray worker) died under it."""
    resumed: bool = False
    """The task continued the session (and workspace) of an earlier run that was interrupted
    or that its own budget stopped."""
    checkpoint: str | None = None
    """The last checkpoint of the task's session (a task with checkpoints on): a later run
    starts from it with `from_checkpoint: "RUN/TASK@CHECKPOINT"`."""
    from_checkpoint: str | None = None
    """The checkpoint of an earlier run this task started from (`RUN/TASK@CHECKPOINT`)."""
    diff: str = ""
    diff_truncated: bool = False
    started_at: float | None = None
    finished_at: float | None = None
    agent: str = "soulwire"
    """Who did the task (`Task.agent_label`): the report compares agents side by side."""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def task_model_name(task: Task, share: Path | None = None) -> str | None:
    """The provider's name of the task's model (what prices are listed by), else its alias.
    The configuration is the task's own, else its `config_file`, else the engines' default
    one in `share` (their share dir), as the engine reads it."""
    config = _task_config(task, share)
    alias = task.model or config.get("default_model")
    models = config.get("models")
    entry = models.get(alias) if isinstance(models, dict) and isinstance(alias, str) else None
    if isinstance(entry, dict) and isinstance(entry.get("model"), str):
        return entry["model"]
    return alias if isinstance(alias, str) else None


def _task_config(task: Task, share: Path | None) -> dict[str, Any]:
    return task.config if task.config is not None else _config_file(task.config_file, share)


def task_prices(task: Task, share: Path | None = None) -> dict[str, ModelPrice]:
    """The `[prices]` of the task's configuration, as its engine prices with them (a table
    that is not one prices nothing: the engine refuses it itself)."""
    try:
        return parse_prices(_task_config(task, share).get("prices", {}))
    except ValueError:
        return {}


def _config_file(config_file: str | os.PathLike[str] | None, share: Path | None) -> dict[str, Any]:
    """The raw configuration the engine reads (empty when there is none or it is unreadable:
    the engine reports that itself)."""
    if config_file is not None:
        path: Path | None = Path(config_file).expanduser()
    elif share is not None:
        path = next(
            (share / name for name in ("config.toml", "config.json") if (share / name).is_file()), None
        )
    else:
        path = None
    if path is None:
        return {}
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return {}
    return _read_config(str(path), stamp)


@functools.lru_cache(maxsize=64)
def _read_config(path: str, stamp: int) -> dict[str, Any]:
    """`read_config_file`, once per file and modification (a fleet's tasks share one)."""
    del stamp  # (part of the cache key only)
    try:
        return read_config_file(Path(path))
    except ConfigError:
        return {}


def task_cost(
    task: Task, usage: Usage, prices: Mapping[str, ModelPrice] | None = None, share: Path | None = None
) -> float | None:
    """What the task's tokens cost in USD, or None when its model has no price: `prices` (the
    run's) over the task configuration's `[prices]`, as its engine prices (`share`: the
    engines' share dir, where the default configuration is)."""
    price = price_for(task_model_name(task, share), {**task_prices(task, share), **(prices or {})})
    if price is None:
        return None
    tokens = TokenUsage(
        input_other=usage.input_other,
        output=usage.output,
        input_cache_read=usage.input_cache_read,
        input_cache_creation=usage.input_cache_creation,
    )
    return round(price.cost(tokens), 6)


def with_earlier_spend(result: TaskResult, before: TaskResult) -> TaskResult:
    """`result` of a run that continued the task's session, with `before` (the task's last line
    of an earlier run) added: its tokens, steps and cost (unknown if either is, unless `before`
    spent nothing); a run that said nothing keeps the earlier final message."""
    was, now = before.usage, result.usage
    usage = Usage(
        input_other=was.input_other + now.input_other,
        output=was.output + now.output,
        input_cache_read=was.input_cache_read + now.input_cache_read,
        input_cache_creation=was.input_cache_creation + now.input_cache_creation,
    )
    if before.usage == Usage() and before.cost_usd is None:
        cost = result.cost_usd
    elif before.cost_usd is None or result.cost_usd is None:
        cost = None
    else:
        cost = round(before.cost_usd + result.cost_usd, 6)
    return result.model_copy(
        update={
            "usage": usage,
            "steps": before.steps + result.steps,
            "cost_usd": cost,
            "final_message": result.final_message or before.final_message,
        }
    )


def read_results(path: Path, skipped: list[int] | None = None) -> dict[str, TaskResult]:
    """The last result of every task in a results file (missing file: none). A line that is
    not a result — a line cut short when the driver was killed — is ignored; its number
    (from 1) goes into `skipped` when given, blank lines aside."""
    results: dict[str, TaskResult] = {}
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return results
    with handle:
        for number, line in enumerate(handle, 1):
            try:
                result = TaskResult.model_validate_json(line)
            except ValidationError:
                if skipped is not None and line.strip():
                    skipped.append(number)
                continue
            results[result.id] = result
    return results


class ResultsWriter:
    """Appends result lines; each is flushed and fsynced before the next, so a result that was
    reported is on disk, and a killed driver loses at most a partly written last line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._needs_newline = _ends_without_newline(path)
        self._file = path.open("a", encoding="utf-8")

    def write(self, result: TaskResult) -> None:
        line = result.model_dump_json()
        if self._needs_newline:  # a truncated line from a killed run: keep ours on its own line
            line = "\n" + line
            self._needs_newline = False
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _ends_without_newline(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return False
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) != b"\n"
    except FileNotFoundError:
        return False


__all__ = [
    "FINISHED",
    "CheckOutcome",
    "EngineLostError",
    "EngineStartError",
    "ResultsWriter",
    "Status",
    "TaskResult",
    "Usage",
    "read_results",
    "task_cost",
    "task_model_name",
    "with_earlier_spend",
]
