"""The fleet driver: skips the tasks a results file already has (but for those their own
budget stopped: they continue), runs the rest through a backend under a concurrency limit,
and writes and yields each result as it finishes."""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from soulwire.fleet.backend import Backend, EngineSettings, LimiterSlot
from soulwire.fleet.budget import RunLimits, RunTotal, stopped_by_own_budget, tokens_of
from soulwire.fleet.errors import first_error
from soulwire.fleet.local import LocalBackend
from soulwire.fleet.results import (
    ResultsWriter,
    Status,
    TaskResult,
    read_results,
    task_cost,
    with_earlier_spend,
)
from soulwire.fleet.runlock import RunLock
from soulwire.fleet.tasks import Task

WATCH_EVERY_S = 0.5
"""How often a run with a run total sums what its running tasks spent so far (it also does at
each task's end, and at the time limit)."""


def default_run_dir(out: Path) -> Path:
    """Where the workspaces of a results file live: `results.jsonl` → `results.run/`."""
    return out.with_name(out.name.removesuffix(".jsonl") + ".run")


class Fleet:
    """Tasks to run, and the state of a run (for progress displays).

    `out` is the results file (appended to; its finished tasks are skipped), `run_dir` holds
    one directory per task (default: beside `out`, else a new temporary directory, removed
    when the run ends: the results keep their diffs). `run_budget` is the run's total over all
    its tasks (`soulwire.fleet.budget`)."""

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        concurrency: int = 4,
        out: str | Path | None = None,
        run_dir: str | Path | None = None,
        backend: Backend | None = None,
        ahead: int | None = None,
        run_budget: RunLimits | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if ahead is not None and ahead < 0:
            raise ValueError(f"ahead must not be negative, not {ahead}")
        self.tasks = list(tasks)
        self.concurrency = concurrency
        self.ahead = max(1, concurrency // 2) if ahead is None else ahead
        """Tasks a staging backend prepares beyond `concurrency` (workspace copied, session
        open), so a task whose place frees is followed by a turn at once instead of by
        the next task's set-up."""
        self.out = Path(out) if out is not None else None
        self.temporary_run_dir = run_dir is None and self.out is None
        if run_dir is not None:
            self.run_dir = Path(run_dir)
        elif self.out is not None:
            self.run_dir = default_run_dir(self.out)
        else:
            self.run_dir = Path(tempfile.mkdtemp(prefix="soulwire-fleet-"))
        self.run_dir = self.run_dir.absolute()  # result lines name workspaces usable from anywhere
        self.backend: Backend = backend or LocalBackend()
        self.skipped: list[TaskResult] = []
        """Results of tasks an earlier run finished (not run again)."""
        self.pending: list[Task] = []
        self._planned_from: tuple[int, int, int] | None = None
        self._before: dict[str, TaskResult] = {}
        """The last lines earlier runs wrote of the tasks to run: what a task that continues its
        session (its budget stopped it, or it was interrupted) spent before is carried over."""
        self._plan()
        self.running: dict[str, float] = {}
        """Task id → time.monotonic() when it started."""
        self.records: dict[str, TaskResult] = {}
        """Task id → the record of a running task, as far as its backend filled it (steps and
        tokens so far, for backends that report them live)."""
        self.finished: list[TaskResult] = []
        self.cancelled: list[str] = []
        self._write_lock = anyio.Lock()
        self._lock: RunLock | None = None
        self.run_total = (
            RunTotal(run_budget) if run_budget is not None and not run_budget.is_empty() else None
        )
        """What the run spent against its total (None: no run total)."""
        self._scopes: dict[str, anyio.CancelScope] = {}
        """Task id → the scope its backend runs in (the run total cancels it)."""
        self._by_id = {t.id: t for t in self.tasks}

    def _plan(self) -> None:
        """Skip what the results file says earlier runs finished (read again only if it changed
        since: a resumed run's file holds every earlier diff)."""
        stamp = _stamp(self.out)
        if stamp is not None and stamp == self._planned_from:
            return
        self._planned_from = stamp
        earlier = read_results(self.out) if self.out is not None else {}
        self.skipped = [
            earlier[t.id]
            for t in self.tasks
            if t.id in earlier and earlier[t.id].finished and not stopped_by_own_budget(earlier[t.id])
        ]
        skip = {r.id for r in self.skipped}
        self.pending = [t for t in self.tasks if t.id not in skip]
        self._before = {t.id: earlier[t.id] for t in self.pending if t.id in earlier}

    @asynccontextmanager
    async def results(self) -> AsyncGenerator[MemoryObjectReceiveStream[TaskResult]]:
        """Run the pending tasks; the stream yields each result as it is written. Leaving the
        block early (or cancelling) stops the running tasks: their engines are closed and
        a `cancelled` line is written for each, so a later run does them again.

        Raises `RunInUseError` when another run has the results file or the run dir."""
        self.claim()
        try:
            async with self._results() as stream:
                yield stream
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def claim(self) -> None:
        """Take the results file and the run dir for this run (`results` does it if not done
        before), and read again what earlier runs finished. Raises `RunInUseError` when
        another run has either."""
        if self._lock is None and not self.temporary_run_dir:
            self._lock = RunLock.acquire(self.out, self.run_dir)
            self._plan()  # what a run that ended while this one was set up finished is done

    @asynccontextmanager
    async def _results(self) -> AsyncGenerator[MemoryObjectReceiveStream[TaskResult]]:
        writer = ResultsWriter(self.out) if self.out is not None else None
        send, receive = anyio.create_memory_object_stream[TaskResult](math.inf)
        limiter = anyio.CapacityLimiter(self.concurrency)
        staged = anyio.CapacityLimiter(self.concurrency + self.ahead)
        try:
            async with AsyncExitStack() as stack:
                if isinstance(self.backend, AbstractAsyncContextManager):  # warm engines, a Ray cluster
                    await stack.enter_async_context(self.backend)
                prepare = getattr(self.backend, "prepare", None)
                if callable(prepare):  # start engines (or workers) before the first task needs them
                    prepare(self.pending, self.concurrency)
                group = await stack.enter_async_context(anyio.create_task_group())
                group.start_soon(self._run_all, limiter, staged, writer, send)
                async with receive:
                    yield receive
        finally:
            if writer is not None:
                writer.close()
            if self.temporary_run_dir:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._remove_run_dir)

    def _remove_run_dir(self) -> None:
        """Remove the temporary run dir (after the engines stopped), and forget the git
        worktrees that were in it."""
        shutil.rmtree(self.run_dir, ignore_errors=True)
        for source in {t.workspace for t in self.tasks if t.workspace_mode == "worktree" and t.workspace}:
            try:
                subprocess.run(["git", "worktree", "prune"], cwd=source, capture_output=True, check=False)
            except OSError:
                pass  # no git: the task failed before it made a worktree

    async def _run_all(
        self,
        limiter: anyio.CapacityLimiter,
        staged: anyio.CapacityLimiter,
        writer: ResultsWriter | None,
        send: MemoryObjectSendStream[TaskResult],
    ) -> None:
        stages = bool(getattr(self.backend, "stages", False)) and self.ahead > 0
        wider = staged if stages else None
        async with send, anyio.create_task_group() as watch:
            if self.run_total is not None:
                self.run_total.started = self.run_total.clock()  # (the run's time starts now)
                watch.start_soon(self._watch_total)
            async with anyio.create_task_group() as tasks:
                for task in self.pending:
                    tasks.start_soon(self._run_one, task, limiter, wider, writer, send.clone())
            watch.cancel_scope.cancel()

    async def _watch_total(self) -> None:
        """Sum the run's spend every WATCH_EVERY_S (and at its time limit) until it is reached."""
        assert self.run_total is not None
        while not self._check_total():
            await anyio.sleep(max(0.0, min(WATCH_EVERY_S, self.run_total.time_left())))

    def _check_total(self) -> bool:
        """Sum the run's spend; once its total is reached, stop the tasks running. True then."""
        total = self.run_total
        if total is None:
            return False
        running = [self._carried(r) for r in self.records.values()]
        total.tally([*self.skipped, *self.finished, *running], self._live_cost)
        if total.reached() is None:
            return False
        for scope in self._scopes.values():
            scope.cancel()
        return True

    def _live_cost(self, result: TaskResult) -> float | None:
        """A running task's cost so far, from the usage its backend reported."""
        settings = getattr(self.backend, "settings", None)
        task = self._by_id.get(result.id)
        if not isinstance(settings, EngineSettings) or task is None or not tokens_of(result):
            return None
        return task_cost(task, result.usage, settings.prices, settings.engine_share_dir(task.env))

    async def _run_one(
        self,
        task: Task,
        limiter: anyio.CapacityLimiter,
        staged: anyio.CapacityLimiter | None,
        writer: ResultsWriter | None,
        send: MemoryObjectSendStream[TaskResult],
    ) -> None:
        """One task: with a staging backend under the wider `staged` limit, the backend
        taking its place in `limiter` when the turn starts; else under `limiter` throughout.
        The task counts as started (`started_at`, running) once it holds its place."""
        record = TaskResult(id=task.id, status="done", agent=task.agent_label)

        def started() -> None:
            self.running[task.id] = time.monotonic()
            record.started_at = time.time()

        slot = LimiterSlot(limiter, started) if staged is not None else None
        async with send, staged if staged is not None else limiter:
            total = self.run_total
            if total is not None and self._check_total():  # reached before this task's turn
                await self._finished(_stopped(record, "cancelled", total.reason(started=False)), writer, send)
                return
            capped = total.capped(task) if total is not None else task
            if slot is None:
                started()
            self.records[task.id] = record
            scope = self._scopes[task.id] = anyio.CancelScope()
            result = record
            try:
                with scope:
                    if slot is None:
                        result = await self.backend.run_task(capped, self.run_dir / task.id, record)
                    else:
                        result = await self.backend.run_task(capped, self.run_dir / task.id, record, slot)
                if scope.cancelled_caught:  # the run total was reached while it ran (or waited)
                    assert total is not None
                    result = _stopped(record, "cancelled", total.reason(started=task.id in self.running))
                elif total is not None:
                    self.records[task.id] = result  # (a remote backend's result is a copy)
                    self._check_total()
                    if total.stopped_at_remainder(task, capped, result.reason):
                        result.status, result.reason = "cancelled", total.reason(started=True)
            except anyio.get_cancelled_exc_class():
                if slot is not None:
                    slot.release()
                self.running.pop(task.id, None)
                self.records.pop(task.id, None)
                self.cancelled.append(task.id)
                if writer is not None:
                    writer.write(self._carried(_stopped(record, "cancelled", "the fleet was interrupted")))
                raise
            except Exception as exc:  # a backend bug must not lose the other tasks' results
                leaf = first_error(exc)
                result = _stopped(record, "failed", f"fleet error: {type(leaf).__name__}: {leaf}")
            finally:
                self._scopes.pop(task.id, None)
            if slot is not None:
                slot.release()
            self.running.pop(task.id, None)
            self.records.pop(task.id, None)
            await self._finished(result, writer, send)

    async def _finished(
        self, result: TaskResult, writer: ResultsWriter | None, send: MemoryObjectSendStream[TaskResult]
    ) -> None:
        """Keep, write and yield a task's result (and count its spend against the run total)."""
        result = self._carried(result)
        self.finished.append(result)
        self._check_total()
        if writer is not None:  # fsynced in a worker thread (the event loop goes on), and
            # shielded: a finished task's line is written even if the fleet stops now
            with anyio.CancelScope(shield=True):
                async with self._write_lock:
                    await anyio.to_thread.run_sync(writer.write, result)
        send.send_nowait(result)

    def _carried(self, result: TaskResult) -> TaskResult:
        """`result` of a task that continued its session, with what its earlier runs spent (the
        last line before holds it): the results file's last line is the task's whole spend."""
        before = self._before.get(result.id)
        if not result.resumed or before is None:
            return result
        return with_earlier_spend(result, before)


def _stamp(path: Path | None) -> tuple[int, int, int] | None:
    """The file's identity, size and modification time (None: no file)."""
    try:
        facts = path.stat() if path is not None else None
    except OSError:
        return None
    return (facts.st_ino, facts.st_size, facts.st_mtime_ns) if facts is not None else None


def _stopped(record: TaskResult, status: Status, reason: str) -> TaskResult:
    """`record` (as far as the backend got) ended as `status`."""
    now = time.time()
    started = record.started_at or now
    return record.model_copy(
        update={"status": status, "reason": reason, "finished_at": now, "duration_s": round(now - started, 3)}
    )


@asynccontextmanager
async def run_fleet(
    tasks: Iterable[Task],
    *,
    concurrency: int = 4,
    out: str | Path | None = None,
    run_dir: str | Path | None = None,
    backend: Backend | None = None,
    ahead: int | None = None,
    run_budget: RunLimits | None = None,
) -> AsyncGenerator[MemoryObjectReceiveStream[TaskResult]]:
    """`async with run_fleet(tasks, concurrency=8, out="results.jsonl") as results:
    async for result in results: ...` — see `Fleet`."""
    fleet = Fleet(
        tasks,
        concurrency=concurrency,
        out=out,
        run_dir=run_dir,
        backend=backend,
        ahead=ahead,
        run_budget=run_budget,
    )
    async with fleet.results() as stream:
        yield stream


async def run_all(
    tasks: Iterable[Task],
    *,
    concurrency: int = 4,
    out: str | Path | None = None,
    run_dir: str | Path | None = None,
    backend: Backend | None = None,
    ahead: int | None = None,
    run_budget: RunLimits | None = None,
) -> list[TaskResult]:
    """Every result of a fleet, in the order they finished."""
    async with run_fleet(
        tasks,
        concurrency=concurrency,
        out=out,
        run_dir=run_dir,
        backend=backend,
        ahead=ahead,
        run_budget=run_budget,
    ) as results:
        return [result async for result in results]


__all__ = ["Fleet", "default_run_dir", "run_all", "run_fleet"]
