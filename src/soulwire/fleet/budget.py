"""A fleet run's total: limits over all the tasks of a results file together (the task file's
`{"fleet": {"budget": {…}}}` line, `fleet run --run-budget-*`), beside each task's own budget.

The driver enforces it in two ways:

- a task starts with its engine's tree limits capped at what the run has left, so the engine
  stops the task itself (`budget_exceeded`) where the run total would be crossed;
- once the total is reached, tasks not started are not started, and running ones are stopped
  (several tasks running at once may together cross what each was given).

Tasks the run total stops are `cancelled` with a reason that starts with `budget_exceeded`:
a later run of the same command (with a higher total) does them again, continuing the
sessions of those that had started. Money and tokens count the whole results file (what an
earlier run finished included: re-running with the same total does not spend it twice); time
counts this run's wall time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from soulwire.wire.budget import Budget, BudgetLimits

if TYPE_CHECKING:  # (the task file's reader imports this module: no cycle at run time)
    from soulwire.fleet.results import TaskResult
    from soulwire.fleet.tasks import Task

RunKind = Literal["usd", "tokens", "time_s"]
RUN_KINDS: tuple[RunKind, ...] = ("usd", "tokens", "time_s")
REASON = "budget_exceeded"


class RunLimits(BaseModel):
    """The run total's limits; an absent one is no limit. Tool calls have no run total: a
    result line does not count them (each task's own budget can limit them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    usd: float | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    time_s: float | None = Field(default=None, gt=0)

    def is_empty(self) -> bool:
        return all(getattr(self, kind) is None for kind in RUN_KINDS)

    def updated(self, other: RunLimits) -> RunLimits:
        """These limits with `other`'s set ones over them (the command line over the file)."""
        return self.model_copy(
            update={k: getattr(other, k) for k in RUN_KINDS if getattr(other, k) is not None}
        )


class RunSettings(BaseModel):
    """The task file's run-wide line, `{"fleet": {…}}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: RunLimits | None = None


def tokens_of(result: TaskResult) -> int:
    usage = result.usage
    return usage.input_other + usage.output + usage.input_cache_read + usage.input_cache_creation


CostOf = Callable[["TaskResult"], "float | None"]
"""A result's cost so far in USD (a running task's, from its live usage), None: no price."""


class RunTotal:
    """What the run has spent against its limits."""

    def __init__(self, limits: RunLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self.started = clock()
        self.spent: dict[RunKind, float] = dict.fromkeys(RUN_KINDS, 0.0)
        self.stop: tuple[RunKind, float, float] | None = None
        """The limit that was reached (kind, spent, max), once one is."""

    def tally(self, results: Iterable[TaskResult], cost_of: CostOf) -> None:
        """Count the results (finished and running) afresh."""
        usd = tokens = 0.0
        for result in results:
            tokens += tokens_of(result)
            usd += (result.cost_usd if result.cost_usd is not None else cost_of(result)) or 0.0
        self.spent = {"usd": round(usd, 6), "tokens": tokens, "time_s": round(self.clock() - self.started, 3)}

    def reached(self) -> tuple[RunKind, float, float] | None:
        """The first limit the tally reaches (kept once found: the run stays stopped)."""
        if self.stop is None:
            for kind in RUN_KINDS:
                maximum = getattr(self.limits, kind)
                if maximum is not None and self.spent[kind] >= maximum:
                    self.stop = (kind, self.spent[kind], float(maximum))
                    break
        return self.stop

    def time_left(self) -> float:
        if self.limits.time_s is None:
            return float("inf")
        return self.limits.time_s - (self.clock() - self.started)

    def remaining(self) -> dict[RunKind, float]:
        """What each set limit has left (≥ 0)."""
        self.spent["time_s"] = round(self.clock() - self.started, 3)
        return {
            kind: max(0.0, float(maximum) - self.spent[kind])
            for kind in RUN_KINDS
            if (maximum := getattr(self.limits, kind)) is not None
        }

    def capped(self, task: Task) -> Task:
        """The task with its engine's tree limits at most what the run has left."""
        left = self.remaining()
        if not left:
            return task
        budget = task.budget or Budget()
        tree = budget.tree or BudgetLimits()
        caps: dict[str, float | int] = {}
        for kind, value in left.items():
            cap: float | int = int(value) if kind == "tokens" else round(value, 6)
            if kind == "time_s":
                cap = max(cap, 0.001)  # (a time limit must be > 0; the run's check stops it)
            own = getattr(tree, kind)
            if own is None or cap < own:
                caps[kind] = cap
        if not caps:
            return task
        tree = tree.model_copy(update=caps)
        return task.model_copy(update={"budget": budget.model_copy(update={"tree": tree})})

    def reason(self, *, started: bool) -> str:
        """The reason of a task the total stopped (`started`) or did not start."""
        what = "stopped" if started else "not started"
        if self.stop is None:  # its engine stopped it at what the run had left
            return f"{REASON}: the run's total is nearly spent ({what} at its remainder)"
        kind, _spent, maximum = self.stop
        return f"{REASON}: the run's total {kind} limit ({_figure(kind, maximum)}) is reached ({what})"

    def stopped_at_remainder(self, task: Task, capped: Task, reason: str | None) -> bool:
        """Whether the engine's `budget_exceeded` stop of `capped` (`task` with the run's
        remainder as its limits) was the run's doing: the total is reached now, or the task
        has no money, token or time limit of its own (then only the remainder could stop it
        so, or its own tool-call limit: told apart by the total alone)."""
        if capped is task or reason != REASON:
            return False
        if self.reached() is not None:
            return True
        own = task.budget
        spend_limits = (
            getattr(limits, kind)
            for scope in ("turn", "session", "tree")
            if own is not None and (limits := own.limits(scope)) is not None
            for kind in RUN_KINDS
        )
        own_tool_calls = own is not None and any(
            (limits := own.limits(scope)) is not None and limits.tool_calls is not None
            for scope in ("turn", "session", "tree")
        )
        return not own_tool_calls and all(value is None for value in spend_limits)

    def status(self) -> dict[str, object]:
        """For progress lines: the limits, spent and left."""
        left = self.remaining()
        return {
            "limits": self.limits.model_dump(exclude_none=True),
            "spent": {k: self.spent[k] for k in left},
            "remaining": {k: round(v, 6) for k, v in left.items()},
            "reached": self.stop is not None,
        }

    def line(self) -> str:
        """For a person: `run total: tokens 1200/5000, usd $0.0100/$1.00`."""
        parts = [
            f"{kind} {_figure(kind, self.spent[kind])}/{_figure(kind, float(getattr(self.limits, kind)))}"
            for kind in RUN_KINDS
            if getattr(self.limits, kind) is not None
        ]
        return "run total: " + ", ".join(parts) + (" (reached)" if self.stop is not None else "")


def _figure(kind: RunKind, value: float) -> str:
    if kind == "usd":
        return f"${value:.4f}"
    if kind == "time_s":
        return f"{value:.0f}s"
    return str(int(value))


def stopped_by_own_budget(result: TaskResult) -> bool:
    """Whether the task's own budget stopped it (`failed`, `budget_exceeded`): a later run of
    the same results file continues its session (with the budget that run gives it)."""
    return result.status == "failed" and result.reason == REASON


def stopped_by_run_total(result: TaskResult) -> bool:
    """Whether the run total stopped the task (or kept it from starting)."""
    return result.status == "cancelled" and (result.reason or "").startswith(f"{REASON}: the run's")


__all__ = [
    "REASON",
    "RUN_KINDS",
    "RunLimits",
    "RunSettings",
    "RunTotal",
    "stopped_by_own_budget",
    "stopped_by_run_total",
    "tokens_of",
]
