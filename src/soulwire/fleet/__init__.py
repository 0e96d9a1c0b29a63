"""Fleets: many agent sessions run as tasks, each in its own copy of a workspace, with a check
command judging the result and one JSON line per task. Drives engines through `soulwire.sdk`
only (import-linter enforces it). See docs/fleet.md.

    from soulwire import fleet

    tasks = fleet.load_tasks("tasks.jsonl")
    async with fleet.run_fleet(tasks, concurrency=8, out="results.jsonl") as results:
        async for result in results:
            print(result.id, result.status, result.passed)
"""

from typing import TYPE_CHECKING

from soulwire.fleet.backend import Backend, EngineSettings, TurnSlot
from soulwire.fleet.local import LocalBackend
from soulwire.fleet.policy import ApprovalRule, ApprovalRules
from soulwire.fleet.results import FINISHED, CheckOutcome, TaskResult, Usage, read_results
from soulwire.fleet.runner import Fleet, default_run_dir, run_all, run_fleet
from soulwire.fleet.tasks import Task, TaskFileError, load_tasks, parse_tasks
from soulwire.fleet.warm import WarmBackend

if TYPE_CHECKING:
    from soulwire.fleet.ray_backend import RayBackend


def __getattr__(name: str) -> object:
    if name == "RayBackend":  # imported on use: Ray is an optional extra
        from soulwire.fleet.ray_backend import RayBackend

        return RayBackend
    raise AttributeError(name)


__all__ = [
    "FINISHED",
    "ApprovalRule",
    "ApprovalRules",
    "Backend",
    "CheckOutcome",
    "EngineSettings",
    "Fleet",
    "LocalBackend",
    "RayBackend",
    "Task",
    "TaskFileError",
    "TaskResult",
    "TurnSlot",
    "Usage",
    "WarmBackend",
    "default_run_dir",
    "load_tasks",
    "parse_tasks",
    "read_results",
    "run_all",
    "run_fleet",
]
