"""A summary of a results file: statuses, check pass rate, tokens, time percentiles and the
failures grouped by cause, as data and as Markdown."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from soulwire.fleet.budget import REASON, stopped_by_run_total
from soulwire.fleet.results import TaskResult


def _percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))
    return ordered[rank]


def failure_cause(result: TaskResult) -> str | None:
    """A short cause to group failures by, or None for a task that is done and passed."""
    if result.status != "done":
        reason = result.reason or result.status
        if result.status == "timed_out":
            return "timed out"
        return f"{result.status}: {reason.split(':', 1)[0]}"
    if result.check is not None and not result.check.passed:
        code = result.check.exit_code
        return "check killed at its time limit" if code is None else f"check exit {code}"
    return None


@dataclass
class Summary:
    tasks: int = 0
    statuses: Counter[str] = field(default_factory=lambda: Counter[str]())
    checked: int = 0
    passed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    cost_usd: float = 0.0
    """What the priced tasks cost (`TaskResult.cost_usd`)."""
    priced: int = 0
    """Tasks with a cost: a model without a price leaves a task's cost unknown."""
    durations: list[float] = field(default_factory=lambda: list[float]())
    budget_stopped: int = 0
    """Tasks a task's own budget stopped (`failed`, `budget_exceeded`)."""
    run_total_stopped: int = 0
    """Tasks the run's total stopped or did not start (`cancelled`, `budget_exceeded: …`)."""
    causes: Counter[str] = field(default_factory=lambda: Counter[str]())
    examples: dict[str, list[str]] = field(default_factory=lambda: dict[str, list[str]]())

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.checked if self.checked else None

    def percentile(self, share: float) -> float:
        return _percentile(self.durations, share)


def summarise(results: list[TaskResult]) -> Summary:
    summary = Summary()
    for result in results:
        summary.tasks += 1
        summary.statuses[result.status] += 1
        if result.check is not None:
            summary.checked += 1
            summary.passed += bool(result.passed)
        summary.input_tokens += (
            result.usage.input_other + result.usage.input_cache_read + result.usage.input_cache_creation
        )
        summary.output_tokens += result.usage.output
        summary.steps += result.steps
        if result.cost_usd is not None:
            summary.cost_usd += result.cost_usd
            summary.priced += 1
        summary.durations.append(result.duration_s)
        summary.budget_stopped += result.status == "failed" and result.reason == REASON
        summary.run_total_stopped += stopped_by_run_total(result)
        cause = failure_cause(result)
        if cause is not None:
            summary.causes[cause] += 1
            ids = summary.examples.setdefault(cause, [])
            if len(ids) < 5:
                ids.append(result.id)
    return summary


def rows(summary: Summary) -> list[tuple[str, str]]:
    """The summary as (measure, value) rows, for a table."""
    statuses = ", ".join(f"{name} {count}" for name, count in sorted(summary.statuses.items())) or "-"
    rate = summary.pass_rate
    passed = f"{summary.passed}/{summary.checked} ({rate:.0%})" if rate is not None else "no checks"
    p50, p90, top = (summary.percentile(share) for share in (0.5, 0.9, 1.0))
    return [
        ("tasks", str(summary.tasks)),
        ("status", statuses),
        ("checks passed", passed),
        ("tokens in / out", f"{summary.input_tokens} / {summary.output_tokens}"),
        ("cost", _cost(summary)),
        ("steps", str(summary.steps)),
        ("duration p50 / p90 / max", f"{p50:.1f}s / {p90:.1f}s / {top:.1f}s"),
        *_budget_rows(summary),
    ]


def _budget_rows(summary: Summary) -> list[tuple[str, str]]:
    """A row only when a budget stopped tasks (a side-by-side table leaves it out)."""
    if not summary.budget_stopped and not summary.run_total_stopped:
        return []
    return [
        (
            "stopped by a budget",
            f"{summary.budget_stopped} by their own, {summary.run_total_stopped} by the run's total",
        )
    ]


def _cost(summary: Summary) -> str:
    if not summary.priced:
        return "unknown (no price for the model, or no usage reported)" if summary.tasks else "-"
    total = f"${summary.cost_usd:.4f}"
    per_task = f"${summary.cost_usd / summary.priced:.4f} per task"
    if summary.priced < summary.tasks:
        unpriced = summary.tasks - summary.priced
        return f"{total} ({per_task}; {unpriced} of {summary.tasks} tasks without a price)"
    return f"{total} ({per_task})"


def to_markdown(summary: Summary) -> str:
    lines = ["| measure | value |", "| --- | --- |"]
    lines += [f"| {name} | {value} |" for name, value in rows(summary)]
    if summary.causes:
        lines += ["", "| failure | tasks | examples |", "| --- | --- | --- |"]
        for cause, count in summary.causes.most_common():
            lines.append(f"| {cause} | {count} | {', '.join(summary.examples[cause])} |")
    return "\n".join(lines) + "\n"


def checkpoints_markdown(results_file: Path, checkpoints: dict[str, str]) -> str:
    """Each task's last checkpoint, as the `from_checkpoint` that starts a task there."""
    lines = ["| task | from_checkpoint |", "| --- | --- |"]
    lines += [
        f"| {task} | `{results_file}/{task}@{checkpoint}` |" for task, checkpoint in checkpoints.items()
    ]
    return "\n".join(lines) + "\n"


def by_agent(results: list[TaskResult]) -> dict[str, Summary]:
    """A summary per agent (`TaskResult.agent`), in the order the agents first appear."""
    groups: dict[str, list[TaskResult]] = {}
    for result in results:
        groups.setdefault(result.agent, []).append(result)
    return {agent: summarise(group) for agent, group in groups.items()}


def agents_markdown(summaries: dict[str, Summary]) -> str:
    """The agents side by side: one column each, the summary's measures as rows."""
    names = list(summaries)
    table = {agent: dict(rows(summary)) for agent, summary in summaries.items()}
    lines = ["| measure | " + " | ".join(names) + " |", "|" + " --- |" * (len(names) + 1)]
    for measure, _ in rows(Summary()):
        lines.append(f"| {measure} | " + " | ".join(table[a][measure] for a in names) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["Summary", "agents_markdown", "by_agent", "failure_cause", "rows", "summarise", "to_markdown"]
