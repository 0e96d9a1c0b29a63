"""What runs a task. The fleet driver owns the task list, the concurrency limit, the results
file and resuming; a backend only runs one task to its result. `LocalBackend` runs engines as
child processes of this one; a Ray backend (planned) would implement the same protocol by
submitting each task to a Ray cluster and awaiting its result, with workspaces prepared on
the worker."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from soulwire.config.loader import share_dir as environ_share_dir
from soulwire.fleet.spawn import default_engine_command, task_environ

if TYPE_CHECKING:  # (annotations only: this module is on the path to starting the engines)
    from soulwire.fleet.results import TaskResult
    from soulwire.fleet.tasks import Task
    from soulwire.sdk.pricing import ModelPrice


@dataclass(frozen=True)
class EngineSettings:
    """How engines are launched, the same for every task of a fleet."""

    executable: str | os.PathLike[str] | Sequence[str] | None = field(default_factory=default_engine_command)
    """The engine command; default this Python's soulwire, so the fleet and its engines match."""
    share_dir: Path | None = None
    """The engines' data directory (sessions); None: the engine's default."""
    env: Mapping[str, str] = field(default_factory=lambda: dict[str, str]())
    inherit_env: bool = True
    startup_timeout: float = 60.0
    """Seconds an engine gets to start, and a warm engine to open a task's session (past it,
    the engine is taken for hung and stopped)."""
    close_timeout: float = 5.0
    cancel_grace: float = 10.0
    """Seconds a turn past its time limit gets to end after `cancel` before the engine is killed."""
    retries: int = 1
    """Runs more of a task whose engine died under it (a fresh workspace and session each)."""
    prices: Mapping[str, ModelPrice] | None = None
    """Prices over `soulwire.sdk.pricing.DEFAULT_PRICES`, for the results' `cost_usd`."""

    def environ(self, task_env: Mapping[str, str]) -> dict[str, str]:
        """The environment of a task's engine, check and external tools (`task_environ`)."""
        return task_environ(task_env, settings_env=self.env, inherit=self.inherit_env)

    def engine_share_dir(self, task_env: Mapping[str, str]) -> Path:
        """Where a task's engine keeps its sessions and finds its default configuration:
        `share_dir`, else what its environment names (the engine's own rule)."""
        return self.share_dir or environ_share_dir(self.environ(task_env))


class TurnSlot:
    """One of the fleet's `concurrency` places, as a task holds it: a backend that stages
    tasks (copies the workspace and opens the session before a place is free) `take`s it
    right before the prompt and holds it through the check and the diff; the driver
    releases it when the task's result is in. Taking it again is a no-op."""

    taken: bool = False

    async def take(self) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class LimiterSlot(TurnSlot):
    """A place in the driver's concurrency limiter; `on_take` marks the task started."""

    def __init__(self, limiter: anyio.CapacityLimiter, on_take: Callable[[], None]) -> None:
        self._limiter = limiter
        self._on_take = on_take

    async def take(self) -> None:
        if not self.taken:
            await self._limiter.acquire_on_behalf_of(self)
            self.taken = True
            self._on_take()

    def release(self) -> None:
        if self.taken:
            self.taken = False
            self._limiter.release_on_behalf_of(self)


class Backend(Protocol):
    """Runs one task in `task_dir` (its own directory, created by the backend) to a result.

    `record` is the task's result, filled in as the backend learns things (work dir, session
    id, steps) and returned at the end; failures are `failed` results, not exceptions. When
    the calling task is cancelled the backend stops the engine and re-raises: the driver then
    writes `record` as `cancelled`, so the line still names the session.

    A backend with `stages = True` gets a `slot` and takes it itself when the task's turn
    starts (what comes before, it may do while other tasks hold every place); others are
    called with the place already held and no slot."""

    name: str

    async def run_task(
        self, task: Task, task_dir: Path, record: TaskResult, slot: TurnSlot | None = None
    ) -> TaskResult: ...


__all__ = ["Backend", "EngineSettings", "LimiterSlot", "TurnSlot"]
