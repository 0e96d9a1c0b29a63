"""Fleets: many agent sessions run as tasks, each in its own copy of a workspace, with a check
command judging the result and one JSON line per task. Drives engines through `soulwire.sdk`
only (import-linter enforces it). See docs/fleet.md.

    from soulwire import fleet

    tasks = fleet.load_tasks("tasks.jsonl")
    async with fleet.run_fleet(tasks, concurrency=8, out="results.jsonl") as results:
        async for result in results:
            print(result.id, result.status, result.passed)
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soulwire.fleet.backend import Backend, EngineSettings, TurnSlot
    from soulwire.fleet.local import LocalBackend
    from soulwire.fleet.policy import ApprovalRule, ApprovalRules
    from soulwire.fleet.ray_backend import RayBackend
    from soulwire.fleet.results import FINISHED, CheckOutcome, TaskResult, Usage, read_results
    from soulwire.fleet.runlock import RunInUseError
    from soulwire.fleet.runner import Fleet, default_run_dir, run_all, run_fleet
    from soulwire.fleet.tasks import Task, TaskFileError, load_tasks, parse_tasks
    from soulwire.fleet.warm import WarmBackend

_HOMES = {
    "soulwire.fleet.backend": ("Backend", "EngineSettings", "TurnSlot"),
    "soulwire.fleet.local": ("LocalBackend",),
    "soulwire.fleet.policy": ("ApprovalRule", "ApprovalRules"),
    "soulwire.fleet.ray_backend": ("RayBackend",),  # Ray is an optional extra
    "soulwire.fleet.results": ("FINISHED", "CheckOutcome", "TaskResult", "Usage", "read_results"),
    "soulwire.fleet.runlock": ("RunInUseError",),
    "soulwire.fleet.runner": ("Fleet", "default_run_dir", "run_all", "run_fleet"),
    "soulwire.fleet.tasks": ("Task", "TaskFileError", "load_tasks", "parse_tasks"),
    "soulwire.fleet.warm": ("WarmBackend",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    """Each name imported from its module on first use: `soulwire fleet run` starts its engines
    after importing only what reading the tasks needs, and the rest loads while they start."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


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
    "RunInUseError",
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
