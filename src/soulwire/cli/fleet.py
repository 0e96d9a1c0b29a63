"""`soulwire fleet run|report`: run a task file as a fleet of agent sessions, and summarise
its results file. Ctrl-C stops cleanly (engines closed, `cancelled` lines written); running
the same command again resumes."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from soulwire.fleet import Backend, Fleet, TaskResult

EXIT_OK, EXIT_FAILURES, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"soulwire fleet: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="soulwire fleet", description="Run many agent sessions as tasks (docs/fleet.md).")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a task file (JSON lines); re-run to resume")
    run.add_argument("tasks", metavar="TASKS.jsonl")
    run.add_argument("--concurrency", "-j", type=_positive, default=4, metavar="N", help="sessions at once")
    out_help = "results file (default: TASKS.results.jsonl beside the tasks)"
    run.add_argument("--out", "-o", metavar="RESULTS.jsonl", help=out_help)
    run.add_argument("--run-dir", metavar="DIR", help="task workspaces (default: RESULTS.run beside --out)")
    run.add_argument("--backend", choices=["local"], default="local", help="where tasks run (local)")
    run.add_argument("--engine", metavar="CMD", help="the engine executable (default: this soulwire)")
    engines_help = (
        "warm: sessions on a few long-lived soulwire serve processes (default); fresh: a process per task"
    )
    run.add_argument("--engines", choices=["warm", "fresh"], help=engines_help)
    run.add_argument(
        "--engines-per-group", type=_positive, metavar="N", help="warm engine processes per settings"
    )
    run.add_argument("--json", action="store_true", help="progress as JSON lines on stdout")
    run.add_argument("--no-progress", action="store_true", help="no live progress line")
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
    return _run(args)


def default_out(tasks: Path) -> Path:
    return tasks.with_name(tasks.name.removesuffix(".jsonl") + ".results.jsonl")


def _ray_backend(args: argparse.Namespace) -> Backend:
    from soulwire.fleet import EngineSettings
    from soulwire.fleet.ray_backend import RayBackend

    # Workers resolve the engine on their own node unless --engine names one.
    settings = EngineSettings(executable=args.engine)
    return RayBackend(
        settings,
        address=args.address,
        workers=args.ray_workers,
        engines_per_worker=args.engines_per_group or 1,
        ship_workspaces=args.ship_workspaces,
    )


def _run(args: argparse.Namespace) -> int:
    import anyio

    from soulwire.fleet import EngineSettings, Fleet, LocalBackend, TaskFileError, WarmBackend, load_tasks

    tasks_path = Path(args.tasks)
    try:
        tasks = load_tasks(tasks_path)
    except TaskFileError as exc:
        sys.stderr.write(f"soulwire fleet: {exc}\n")
        return EXIT_USAGE
    out = Path(args.out) if args.out else default_out(tasks_path)
    settings = EngineSettings(executable=args.engine) if args.engine else EngineSettings()
    # Warm engines are `soulwire serve` processes: another engine (--engine kimi) runs fresh.
    warm = args.engines == "warm" or (args.engines is None and not args.engine)
    backend: Backend
    if args.backend == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            sys.stderr.write("soulwire fleet: the Ray backend needs Ray: pip install 'soulwire[ray]'\n")
            return EXIT_USAGE
        backend = _ray_backend(args)
    elif warm:
        backend = WarmBackend(settings, engines_per_group=args.engines_per_group)
    else:
        backend = LocalBackend(settings)
    try:
        fleet = Fleet(tasks, concurrency=args.concurrency, out=out, run_dir=args.run_dir, backend=backend)
    except OSError as exc:  # the results file cannot be read
        sys.stderr.write(f"soulwire fleet: {exc}\n")
        return EXIT_FAILURES
    progress = _Progress(fleet, json_lines=args.json, live=not args.no_progress and sys.stderr.isatty())
    try:
        interrupted = anyio.run(_drive, fleet, progress)
    except (OSError, RuntimeError) as exc:  # the results file or run dir, a Ray cluster not reached
        progress.close(False)
        sys.stderr.write(f"soulwire fleet: {' '.join(str(exc).split())[:300]}\n")
        return EXIT_FAILURES
    progress.close(interrupted)
    if interrupted:
        return EXIT_INTERRUPTED
    every = [*fleet.skipped, *fleet.finished]
    ok = all(r.status == "done" and r.passed is not False for r in every)
    return EXIT_OK if ok else EXIT_FAILURES


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

        group.start_soon(watch_signals)
        if progress.live:
            group.start_soon(ticker)
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
            "pending": len(fleet.pending) - len(fleet.finished) - len(fleet.running),
            "elapsed_s": round(time.monotonic() - self.started, 2),
        }

    def _status(self) -> str:
        counts = self._counts()
        fleet = self.fleet
        tokens = sum(r.usage.input_other + r.usage.output for r in fleet.finished)
        elapsed = max(counts["elapsed_s"], 1e-6)
        rate = len(fleet.finished) / elapsed
        now = time.monotonic()
        slowest = sorted(fleet.running.items(), key=lambda item: item[1])[:3]
        slow = ", ".join(f"{task_id} {now - since:.0f}s" for task_id, since in slowest)
        return (
            f"{counts['done']} done · {counts['running']} running · {counts['failed']} failed · "
            f"{counts['timed_out']} timed out · {counts['pending']} waiting · {rate:.2f} tasks/s · "
            f"{tokens} tokens" + (f" · running longest: {slow}" if slow else "")
        )

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._status())

    def close(self, interrupted: bool) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        fleet = self.fleet
        if self.json_lines:
            record = {"event": "fleet_finished", "interrupted": interrupted, **self._counts()}
            record["cancelled"] = len(fleet.cancelled)
            sys.stdout.write(json.dumps(record) + "\n")
            return
        counts = self._counts()
        summary = (
            f"fleet: {counts['done']} done, {counts['failed']} failed, {counts['timed_out']} timed out "
            f"in {counts['elapsed_s']:.1f}s"
        )
        if fleet.skipped:
            summary += f" ({len(fleet.skipped)} more finished by an earlier run)"
        if interrupted:
            summary += f"; {len(fleet.cancelled)} cancelled. Run the same command again to resume."
        self.note(summary)


def _brief(result: TaskResult) -> dict[str, Any]:
    return {
        "id": result.id,
        "status": result.status,
        "reason": result.reason,
        "passed": result.passed,
        "duration_s": result.duration_s,
        "steps": result.steps,
        "session_id": result.session_id,
    }


def _report(args: argparse.Namespace) -> int:
    from soulwire.fleet import read_results
    from soulwire.fleet.report import rows, summarise, to_markdown

    path = Path(args.results)
    if not path.is_file():
        sys.stderr.write(f"soulwire fleet: no results file: {path}\n")
        return EXIT_USAGE
    summary = summarise(list(read_results(path).values()))
    if args.json:
        record: dict[str, Any] = {name: value for name, value in rows(summary)}
        record["failures"] = dict(summary.causes.most_common())
        sys.stdout.write(json.dumps(record, indent=2) + "\n")
    elif args.markdown:
        sys.stdout.write(to_markdown(summary))
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
    return EXIT_OK
