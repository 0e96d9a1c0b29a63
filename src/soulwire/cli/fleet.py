"""`soulwire fleet run|report`: run a task file as a fleet of agent sessions, and summarise
its results file. Ctrl-C stops cleanly (engines closed, `cancelled` lines written); running
the same command again resumes."""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulwire.session_flags import int_at_least
from soulwire.usage import CommandParser
from soulwire.wire.environment import share_dir_from

if TYPE_CHECKING:
    from soulwire.fleet import Backend, EngineSettings, Fleet, Task, TaskResult
    from soulwire.fleet.budget import RunLimits
    from soulwire.fleet.engines import StartingEngines
    from soulwire.fleet.spawn import EarlyGroup, GroupKey
    from soulwire.sdk.pricing import ModelPrice

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


_positive = int_at_least(1)
_non_negative = int_at_least(0)


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="soulwire fleet",
        description="Run many agent sessions as tasks (docs/fleet.md).",
        examples=(
            "soulwire fleet run tasks.jsonl -j 8          # results in tasks.results.jsonl",
            "soulwire fleet run tasks.jsonl               # again: resumes what did not finish",
            "soulwire fleet report tasks.results.jsonl --markdown",
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a task file (JSON lines); re-run to resume")
    run.add_argument("tasks", metavar="TASKS.jsonl")
    run.add_argument("--concurrency", "-j", type=_positive, default=4, metavar="N", help="sessions at once")
    out_help = "results file (default: TASKS.results.jsonl beside the tasks)"
    run.add_argument("--out", "-o", metavar="RESULTS.jsonl", help=out_help)
    run.add_argument("--run-dir", metavar="DIR", help="task workspaces (default: RESULTS.run beside --out)")
    run.add_argument("--backend", choices=["local", "ray"], default="local", help="where tasks run")
    address_help = "ray: the cluster (HOST:PORT, ray://…, auto; default: a local one in this process)"
    run.add_argument("--address", metavar="ADDR", help=address_help)
    run.add_argument(
        "--ray-workers", type=_positive, metavar="N", help="ray: worker actors (default: one per node)"
    )
    run.add_argument("--ship-workspaces", action="store_true", help="ray: send workspaces to the workers")
    run.add_argument("--engine", metavar="CMD", help="the engine executable (default: this soulwire)")
    engines_help = (
        "warm: sessions on a few long-lived soulwire serve processes (default); fresh: a process per task"
    )
    run.add_argument("--engines", choices=["warm", "fresh"], help=engines_help)
    run.add_argument(
        "--engines-per-group",
        type=_positive,
        metavar="N",
        help="warm engines per settings (ray: per worker; default: the CPUs, at most 4)",
    )
    ahead_help = (
        "tasks whose workspace and session are prepared while every place is taken"
        " (default: half the concurrency; 0: none)"
    )
    run.add_argument("--stage-ahead", type=_non_negative, metavar="N", help=ahead_help)
    prices_help = (
        'USD per million tokens by model name for the results\' cost, a JSON object: {"MODEL": '
        '{"input": 0.6, "output": 2.5, "cache_read": 0.15}, "*": {…}} (over the built-in list prices)'
    )
    run.add_argument("--prices", metavar="PRICES.json", help=prices_help)
    from soulwire.cli.budget_flags import add_budget_flags

    add_budget_flags(run.add_argument, what="each task", prices=False)
    from soulwire.cli.budget_flags import amount, count, duration

    run_total = "the run's total over all its tasks (over the task file's fleet line)"
    run.add_argument("--run-budget-usd", type=amount, metavar="USD", help=f"money: {run_total}")
    run.add_argument(
        "--run-budget-tokens", type=count, metavar="N", help=f"input + output tokens: {run_total}"
    )
    run.add_argument("--run-budget-time", type=duration, metavar="DURATION", help=f"wall time: {run_total}")
    run.add_argument("--json", action="store_true", help="progress as JSON lines on stdout")
    run.add_argument("--no-progress", action="store_true", help="no live progress line")
    interval_help = "with --json: seconds between progress lines (default 2)"
    run.add_argument("--progress-interval", type=float, default=2.0, metavar="S", help=interval_help)
    report = commands.add_parser("report", help="summarise a results file")
    report.add_argument("results", metavar="RESULTS.jsonl")
    report.add_argument("--markdown", action="store_true", help="a Markdown table instead")
    report.add_argument("--json", action="store_true", help="the summary as JSON")
    return parser


def run_fleet_command(argv: list[str]) -> int:
    """Entry point of `soulwire fleet …`; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report(args)
    from soulwire.cli.budget_flags import scoped_limits
    from soulwire.usage import UsageError

    try:
        scoped_limits(args)  # a --budget-scope without a limit is refused before anything runs
    except UsageError as exc:
        sys.stderr.write(UsageError(str(exc), "soulwire fleet run").line() + "\n")
        return EXIT_USAGE
    return _run(args)


def default_out(tasks: Path) -> Path:
    return tasks.with_name(tasks.name.removesuffix(".jsonl") + ".results.jsonl")


def load_prices(path: Path) -> dict[str, ModelPrice]:
    """A `--prices` file (`soulwire.sdk.pricing.parse_prices`); ValueError in one line."""
    from soulwire.sdk.pricing import parse_prices

    try:
        return parse_prices(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _ray_backend(args: argparse.Namespace, prices: Mapping[str, ModelPrice] | None) -> Backend:
    from soulwire.fleet import EngineSettings
    from soulwire.fleet.ray_backend import RayBackend

    # Workers resolve the engine on their own node unless --engine names one. A share dir set
    # for this command goes to the workers' engines too (they do not get the driver's
    # environment): the sessions land where `soulwire --session`, `web` and `vis` look here.
    share = share_dir_from(os.environ)
    share_dir = Path(share).expanduser() if share else None
    settings = EngineSettings(executable=args.engine, share_dir=share_dir, prices=prices)
    return RayBackend(
        settings,
        address=args.address,
        workers=args.ray_workers,
        engines_per_worker=args.engines_per_group,
        ship_workspaces=args.ship_workspaces,
    )


def _warm(args: argparse.Namespace) -> bool:
    """Whether tasks run on warm `soulwire serve` engines: another engine (--engine kimi) runs fresh."""
    return args.backend == "local" and (args.engines == "warm" or (args.engines is None and not args.engine))


def _spawn_early(args: argparse.Namespace, tasks_path: Path) -> EarlyGroup | None:
    """The first task's warm engines, spawned before anyio, asyncio and the task model are
    imported and the file validated (~0.1 s sooner than from the event loop, and the engine
    group's start-up is the longest part of the way to the first task)."""
    if not _warm(args):
        return None
    from soulwire.fleet.spawn import spawn_first_group

    return spawn_first_group(tasks_path, engine=args.engine, per_group=args.engines_per_group)


def _run(args: argparse.Namespace) -> int:
    tasks_path = Path(args.tasks)
    early = _spawn_early(args, tasks_path)  # first: the rest of the way to a task waits for it
    # No cyclic collections while the fleet, the task model and the tasks are loaded (thousands
    # of long-lived objects, next to no garbage); `collect_rarely` turns it back on for the run.
    gc.disable()
    import anyio

    if args.backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            sys.stderr.write("soulwire fleet: the Ray backend needs Ray: pip install 'soulwire[ray]'\n")
            return EXIT_USAGE
    code = anyio.run(_run_tasks, args, tasks_path, early)
    if args.backend == "local":
        # Everything is written (result lines fsynced, engines stopped and waited for): skip
        # the interpreter's teardown of a run's worth of objects and threads, a fifth of a
        # second after the last result of a 200-task run (bench/RESULTS.md §11g).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


async def _run_tasks(args: argparse.Namespace, tasks_path: Path, early_group: EarlyGroup | None) -> int:
    """The run, from the first engine's spawn: the warm engines of the first task's settings
    (as its line says, unvalidated) were spawned before the event loop (`_spawn_early`); the
    task model is imported and the file validated while they start."""
    import anyio

    from soulwire.fleet.backend import EngineSettings

    prices: dict[str, ModelPrice] | None = None
    if args.prices:
        try:
            prices = load_prices(Path(args.prices))
        except ValueError as exc:
            sys.stderr.write(f"soulwire fleet: {exc}\n")
            return EXIT_USAGE
    settings = EngineSettings(executable=args.engine) if args.engine else EngineSettings()
    settings = replace(settings, prices=prices)
    warm = _warm(args)
    early: dict[GroupKey, StartingEngines] = {}
    if early_group is not None:
        from soulwire.fleet.engines import adopt_early

        early[early_group.key] = adopt_early(early_group, settings)
    try:
        from soulwire.fleet.tasks import TaskFileError, load_tasks

        try:
            tasks = load_tasks(tasks_path)
        except TaskFileError as exc:
            sys.stderr.write(f"soulwire fleet: {exc}\n")
            return EXIT_USAGE
        run_budget = _run_budget(args, tasks)
        tasks = _with_budget(args, tasks)
        if not tasks:  # (a nightly job's empty list: nothing to do, and no files made for it)
            sys.stderr.write(f"soulwire fleet: {tasks_path} has no tasks: nothing to run\n")
            if args.json:  # the last line a machine waits for, as any run's (nothing is made)
                from soulwire.fleet import Fleet

                out = Path(args.out) if args.out else default_out(tasks_path)
                _Progress(Fleet([], out=out, run_dir=args.run_dir), json_lines=True, live=False).close(False)
            return EXIT_OK
        return await _run_fleet(args, tasks, settings, warm, early, run_budget)
    finally:
        with anyio.CancelScope(shield=True):
            for starting in early.values():  # (a no-op for those the backend took and stopped)
                await starting.kill()


def _with_budget(args: argparse.Namespace, tasks: list[Task]) -> list[Task]:
    """The tasks with the `--budget-*` flags' limits under their own `budget`."""
    from soulwire.cli.budget_flags import scoped_limits

    limits = scoped_limits(args)
    if not limits:
        return tasks
    from soulwire.wire.budget import Budget

    base = Budget.model_validate(limits)
    return [
        t.model_copy(update={"budget": base if t.budget is None else base.updated(t.budget)}) for t in tasks
    ]


def _run_budget(args: argparse.Namespace, tasks: list[Task]) -> RunLimits | None:
    """The run total: the task file's fleet line, with the `--run-budget-*` flags over it."""
    from soulwire.fleet.budget import RunLimits
    from soulwire.fleet.tasks import TaskFile

    own = tasks.run.budget if isinstance(tasks, TaskFile) else None
    flags = RunLimits(usd=args.run_budget_usd, tokens=args.run_budget_tokens, time_s=args.run_budget_time)
    merged = flags if own is None else own.updated(flags)
    return None if merged.is_empty() else merged


async def _run_fleet(
    args: argparse.Namespace,
    tasks: list[Task],
    settings: EngineSettings,
    warm: bool,
    early: dict[GroupKey, StartingEngines],
    run_budget: RunLimits | None = None,
) -> int:
    from soulwire.config.process_env import collect_rarely
    from soulwire.fleet import Fleet, LocalBackend, WarmBackend

    out = Path(args.out) if args.out else default_out(Path(args.tasks))
    backend: Backend
    if args.backend == "ray":
        backend = _ray_backend(args, settings.prices)
    elif warm:
        backend = WarmBackend(settings, engines_per_group=args.engines_per_group, early=early)
    else:
        backend = LocalBackend(settings)
    try:
        fleet = Fleet(
            tasks,
            concurrency=args.concurrency,
            out=out,
            run_dir=args.run_dir,
            backend=backend,
            ahead=args.stage_ahead,
            run_budget=run_budget,
        )
    except OSError as exc:  # the results file cannot be read
        sys.stderr.write(f"soulwire fleet: {exc}\n")
        return EXIT_FAILURES
    from soulwire.fleet import RunInUseError

    try:
        fleet.claim()
    except (RunInUseError, OSError) as exc:  # the same command running elsewhere: one line
        sys.stderr.write(f"soulwire fleet: {exc}\n")
        return EXIT_FAILURES
    # The collector back on for the run, rarely: with the defaults a 200-task run's messages,
    # events and results made ~250 collections (0.2-0.3 s of the driver's CPU).
    collect_rarely()
    progress = _Progress(fleet, json_lines=args.json, live=not args.no_progress and sys.stderr.isatty())
    progress.json_interval = max(0.05, args.progress_interval)
    try:
        interrupted = await _drive(fleet, progress)
    except (OSError, RuntimeError, BaseExceptionGroup) as caught:
        # the results file or run dir, a Ray cluster not reached (raised in _drive's task
        # group: one error in a group)
        exc = _single_error(caught)
        if not isinstance(exc, OSError | RuntimeError):
            raise
        progress.close(False, stopped_by_error=True)
        sys.stderr.write(f"soulwire fleet: {' '.join(str(exc).split())[:300]}\n")
        return EXIT_FAILURES
    progress.close(interrupted)
    if interrupted:
        return EXIT_INTERRUPTED
    every = [*fleet.skipped, *fleet.finished]
    ok = all(r.status == "done" and r.passed is not False for r in every)
    return EXIT_OK if ok else EXIT_FAILURES


def _single_error(exc: BaseException) -> BaseException:
    """The one error inside (nested) exception groups of one member each, else `exc`."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _drive(fleet: Fleet, progress: _Progress) -> bool:
    """Run the fleet until it ends or SIGINT/SIGTERM; True when interrupted."""
    import anyio

    interrupted = False
    async with anyio.create_task_group() as group:

        async def watch_signals() -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    interrupted = True
                    progress.note("interrupted: stopping the running tasks…")
                    group.cancel_scope.cancel()
                    return

        async def ticker() -> None:
            while True:
                progress.refresh()
                await anyio.sleep(0.25)

        async def json_ticker() -> None:
            while True:
                await anyio.sleep(progress.json_interval)
                progress.emit_progress()

        group.start_soon(watch_signals)
        if progress.live:
            group.start_soon(ticker)
        if progress.json_lines:
            group.start_soon(json_ticker)
        progress.start()
        async with fleet.results() as results:
            async for result in results:
                progress.finished(result)
        group.cancel_scope.cancel()
    return interrupted


class _Progress:
    """Finished tasks as lines, plus (in a terminal) a live status line with rich."""

    def __init__(self, fleet: Fleet, *, json_lines: bool, live: bool) -> None:
        self.fleet = fleet
        self.json_lines = json_lines
        self.live = live and not json_lines
        self.started = time.monotonic()
        self.json_interval = 2.0
        """Seconds between `progress` lines with --json."""
        self._live: Any = None
        self._console: Any = None

    def start(self) -> None:
        fleet = self.fleet
        self.note(
            f"fleet: {len(fleet.tasks)} tasks, {len(fleet.skipped)} already finished, "
            f"{len(fleet.pending)} to run at concurrency {fleet.concurrency}; results: {fleet.out}"
        )
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(stderr=True)
            self._live = Live(self._status(), console=self._console, refresh_per_second=4, transient=True)
            self._live.start()

    def note(self, text: str) -> None:
        if self.json_lines:
            return
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def finished(self, result: TaskResult) -> None:
        if self.json_lines:
            record = {"event": "task_finished", **self._counts(), **_brief(result)}
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()
            return
        check = "" if result.passed is None else (" check passed" if result.passed else " check FAILED")
        reason = f" ({result.reason})" if result.reason else ""
        took = f"in {result.duration_s:.1f}s, {result.steps} steps"
        self.note(f"{result.id}: {result.status}{reason}{check} {took}")
        self.refresh()

    def _counts(self) -> dict[str, Any]:
        fleet = self.fleet
        statuses = [r.status for r in fleet.finished]
        return {
            "done": statuses.count("done"),
            "failed": statuses.count("failed"),
            "timed_out": statuses.count("timed_out"),
            "running": len(fleet.running),
            # Set up (workspace copied, session open) and waiting for a place: --stage-ahead.
            "staged": len(fleet.records) - len(fleet.running),
            "pending": len(fleet.pending) - len(fleet.finished) - len(fleet.records),
            "elapsed_s": round(time.monotonic() - self.started, 2),
        }

    def _spend(self) -> dict[str, Any]:
        """Tokens and cost so far: finished tasks, plus the running tasks' tokens as reported."""
        fleet = self.fleet
        every = [*fleet.finished, *list(fleet.records.values())]
        tokens = sum(_tokens(r) for r in every)
        costs = [r.cost_usd for r in fleet.finished if r.cost_usd is not None]
        spend: dict[str, Any] = {"tokens": tokens, "cost_usd": round(sum(costs), 6) if costs else None}
        if fleet.run_total is not None:
            spend["run_budget"] = fleet.run_total.status()
        return spend

    def _slowest(self, count: int = 3) -> list[dict[str, Any]]:
        """The running tasks that have run longest, with their steps and tokens so far."""
        fleet = self.fleet
        now = time.monotonic()
        slowest = sorted(fleet.running.items(), key=lambda item: item[1])[:count]
        found: list[dict[str, Any]] = []
        for task_id, since in slowest:
            record = fleet.records.get(task_id)
            steps = record.steps if record is not None else 0
            tokens = _tokens(record) if record is not None else 0
            found.append(
                {"id": task_id, "running_s": round(now - since, 1), "steps": steps, "tokens": tokens}
            )
        return found

    def emit_progress(self) -> None:
        """One `progress` JSON line (with --json): counts, throughput, spend, slowest tasks."""
        record: dict[str, Any] = {"event": "progress", **self._counts(), **self._spend()}
        record["tasks_per_s"] = round(len(self.fleet.finished) / max(record["elapsed_s"], 1e-6), 3)
        record["slowest"] = self._slowest()
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    def _status(self) -> str:
        counts = self._counts()
        fleet = self.fleet
        spend = self._spend()
        elapsed = max(counts["elapsed_s"], 1e-6)
        rate = len(fleet.finished) / elapsed
        slow = ", ".join(
            f"{s['id']} {s['running_s']:.0f}s ({s['steps']} steps, {s['tokens']} tok)"
            for s in self._slowest()
        )
        cost = f" · ${spend['cost_usd']:.4f}" if spend["cost_usd"] is not None else ""
        if fleet.run_total is not None:
            cost += f" · {fleet.run_total.line()}"
        return (
            f"{counts['done']} done · {counts['running']} running · {counts['staged']} staged · "
            f"{counts['failed']} failed · "
            f"{counts['timed_out']} timed out · {counts['pending']} waiting · {rate:.2f} tasks/s · "
            f"{spend['tokens']} tokens{cost}" + (f" · running longest: {slow}" if slow else "")
        )

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._status())

    def close(self, interrupted: bool, *, stopped_by_error: bool = False) -> None:
        """The last word: `fleet_finished` for machines; for a person the summary, unless an
        error (said in its own line) stopped the run before any task finished."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        fleet = self.fleet
        from soulwire.fleet.budget import stopped_by_run_total

        total = fleet.run_total
        stopped = [r.id for r in fleet.finished if stopped_by_run_total(r)]
        if self.json_lines:
            record = {"event": "fleet_finished", "interrupted": interrupted, **self._counts()}
            record["cancelled"] = len(fleet.cancelled)
            if total is not None:
                record["run_budget"] = {**total.status(), "stopped_tasks": len(stopped)}
            sys.stdout.write(json.dumps(record) + "\n")
            return
        counts = self._counts()
        if stopped_by_error and not fleet.finished:
            return
        summary = (
            f"fleet: {counts['done']} done, {counts['failed']} failed, {counts['timed_out']} timed out "
            f"in {counts['elapsed_s']:.1f}s"
        )
        if fleet.skipped:
            summary += f" ({len(fleet.skipped)} more finished by an earlier run)"
        if interrupted:
            summary += f"; {len(fleet.cancelled)} cancelled. Run the same command again to resume."
        self.note(summary)
        if total is not None:
            again = " (raise it and run the same command again to do them)" if stopped else ""
            self.note(f"fleet: {total.line()}; {len(stopped)} tasks stopped or not started by it{again}")


def _tokens(result: TaskResult) -> int:
    usage = result.usage
    return usage.input_other + usage.output + usage.input_cache_read + usage.input_cache_creation


def _brief(result: TaskResult) -> dict[str, Any]:
    return {
        "id": result.id,
        "status": result.status,
        "reason": result.reason,
        "passed": result.passed,
        "duration_s": result.duration_s,
        "steps": result.steps,
        "tokens": _tokens(result),
        "cost_usd": result.cost_usd,
        "session_id": result.session_id,
        "checkpoint": result.checkpoint,
    }


def _is_task_line(path: Path, number: int) -> bool:
    """Whether line `number` of `path` is a JSON object with a `prompt`: a task, not a result."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for current, line in enumerate(handle, 1):
            if current == number:
                try:
                    record = json.loads(line)
                except ValueError:
                    return False
                return isinstance(record, dict) and "prompt" in record
    return False


def _report(args: argparse.Namespace) -> int:
    from soulwire.fleet import read_results
    from soulwire.fleet.report import (
        agents_markdown,
        by_agent,
        checkpoints_markdown,
        rows,
        summarise,
        to_markdown,
    )

    path = Path(args.results)
    if not path.is_file():
        sys.stderr.write(f"soulwire fleet: no results file: {path}\n")
        return EXIT_USAGE
    skipped: list[int] = []
    results = read_results(path, skipped)
    if skipped and not results:
        hint = (
            f" (a task file? its results go to {default_out(path)})"
            if _is_task_line(path, skipped[0])
            else ""
        )
        sys.stderr.write(f"soulwire fleet: {path} holds no result lines{hint}\n")
        return EXIT_USAGE
    if skipped:
        numbers = ", ".join(str(n) for n in skipped[:5]) + (", …" if len(skipped) > 5 else "")
        sys.stderr.write(f"soulwire fleet: {path}: skipped lines that are not results: {numbers}\n")
    summary = summarise(list(results.values()))
    checkpoints = {r.id: r.checkpoint for r in results.values() if r.checkpoint is not None}
    agents = by_agent(list(results.values()))
    side_by_side = agents if len(agents) > 1 else {}  # a fleet of several agents compares them
    if args.json:
        record: dict[str, Any] = {name: value for name, value in rows(summary)}
        record["cost_usd"] = round(summary.cost_usd, 6) if summary.priced else None
        record["failures"] = dict(summary.causes.most_common())
        if side_by_side:
            record["agents"] = {agent: dict(rows(s)) for agent, s in side_by_side.items()}
        if checkpoints:
            record["checkpoints"] = checkpoints
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    elif args.markdown:
        sys.stdout.write(to_markdown(summary))
        if checkpoints:
            sys.stdout.write("\n" + checkpoints_markdown(path, checkpoints))
        if side_by_side:
            sys.stdout.write("\n" + agents_markdown(side_by_side))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"fleet results: {path}")
        table.add_column("measure")
        table.add_column("value")
        for name, value in rows(summary):
            table.add_row(name, value)
        console = Console()
        console.print(table)
        if summary.causes:
            failures = Table(title="failures by cause")
            for column in ("cause", "tasks", "examples"):
                failures.add_column(column)
            for cause, count in summary.causes.most_common():
                failures.add_row(cause, str(count), ", ".join(summary.examples[cause]))
            console.print(failures)
        if side_by_side:
            compared = Table(title="agents side by side")
            compared.add_column("measure")
            for agent in side_by_side:
                compared.add_column(agent)
            columns = [dict(rows(s)) for s in side_by_side.values()]
            for measure, _ in rows(summary):
                compared.add_row(measure, *(column[measure] for column in columns))
            console.print(compared)
        if checkpoints:
            table = Table(title="last checkpoints (a task line's from_checkpoint starts there)")
            table.add_column("task")
            table.add_column("from_checkpoint")
            for task, checkpoint in checkpoints.items():
                table.add_row(task, f"{path}/{task}@{checkpoint}")
            console.print(table)
    return EXIT_OK
