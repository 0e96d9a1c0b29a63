"""The Ray backend (`pip install 'soulwire[ray]'`; Ray is imported here only).

Ray places a number of `FleetWorker` actors on the cluster's nodes by their declared
resources (`num_cpus` each, plus any custom resources), and each task of the fleet is one
method call on a worker: the worker runs it with warm engines on its node (a `WarmBackend`:
a few `soulwire serve` processes, many sessions each) and returns the result. Ray's fault
tolerance does the recovering: a worker process that dies is restarted (`max_restarts`) and
the calls it had in flight are retried on it (`max_task_retries`), wherever Ray puts it. The
driver awaits one result per task, so a retried task still gives exactly one result line.

Workspaces: by default a task's `workspace` path is read on the worker (a shared file
system, or the same machine). With `ship_workspaces` the driver packs each workspace once
into Ray's object store and the worker unpacks it into the task's directory on its node."""

from __future__ import annotations

import asyncio
import importlib
import io
import logging
import os
import socket
import sys
import tarfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from soulwire.fleet.backend import EngineSettings, TurnSlot
from soulwire.fleet.engines import default_engines_per_group
from soulwire.fleet.local import one_line
from soulwire.fleet.results import TaskResult
from soulwire.fleet.runlock import fleet_outputs
from soulwire.fleet.tasks import Task


def _ray() -> Any:
    """The `ray` module (the optional extra), untyped: this module is all that uses it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RuntimeError("the Ray backend needs Ray: pip install 'soulwire[ray]'") from None


class _NoSigtermNotice(logging.Filter):
    """Drops Ray's "SIGTERM handler is not set" warning. The local cluster is started from a
    worker thread (the progress display keeps running meanwhile), where Ray cannot install
    its handler; the command handles its signals itself, so the line only worried people."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("SIGTERM handler is not set")


_PROBE_TIMEOUT_S = 10.0
"""How long a cluster's address may take to accept a TCP connection before the run stops
with "cannot reach the Ray cluster" (Ray itself retries an unreachable address for ever)."""


def cluster_endpoint(address: str) -> tuple[str, int] | None:
    """`(host, port)` of a cluster address to probe (`HOST:PORT`, `ray://HOST:PORT`); None
    for `auto` and anything else, which Ray resolves itself."""
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def probe_cluster(address: str, timeout: float = _PROBE_TIMEOUT_S) -> None:
    """Raise ConnectionError, in one line, when nothing accepts a connection at `address`."""
    endpoint = cluster_endpoint(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ConnectionError(f"cannot reach the Ray cluster at {address}: {reason}") from None


async def _in_daemon_thread(call: Any) -> Any:
    """`call()` on a daemon thread, awaited. `ray.init` joining a cluster can block in Ray's
    native code for as long as it retries; on a worker thread of the loop's executor, a run
    interrupted meanwhile (Ctrl-C) could not exit, since the interpreter joins those threads
    at exit. (Joining starts no process, so the thread may end once the call returns.)"""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)

    def run() -> None:
        try:
            value, error = call(), None
        except BaseException as exc:  # handed to the awaiting task, raised there
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=run, name="ray-init", daemon=True).start()
    return await future


def pack_workspace(source: Path, leave_out: Collection[str] = ()) -> bytes:
    """A gzip tarball of `source` (paths relative to it) without the absolute paths in
    `leave_out` (the fleet's own run dir and results file, `runlock.fleet_outputs`)."""

    def keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if os.path.normpath(os.path.join(source, member.name)) in leave_out else member

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(source, arcname=".", filter=keep if leave_out else None)
    return buffer.getvalue()


def unpack_workspace(data: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(dest, filter="data")


class _WorkerSlot(TurnSlot):
    """The driver's place for a task staged on a worker: `take` tells `stage` the task is
    ready and waits until `go` says the driver holds the place."""

    def __init__(self, record: TaskResult) -> None:
        self.record = record
        self.asked = asyncio.Event()
        self._granted = asyncio.Event()
        self._started_at = 0.0

    def grant(self, started_at: float) -> None:
        self._started_at = started_at
        self._granted.set()

    async def take(self) -> None:
        if not self.taken:
            self.asked.set()
            await self._granted.wait()
            self.taken = True
            self.record.started_at = self._started_at

    def release(self) -> None:
        self.taken = False  # (the driver's place: the driver releases it)


class FleetWorker:
    """A Ray actor (async, many calls at once) that runs tasks with warm engines."""

    def __init__(self, settings: EngineSettings, engines: int, run_root: str | None) -> None:
        from soulwire.fleet.warm import WarmBackend

        if settings.executable is None:  # this node's Python, not the driver's
            settings = replace(settings, executable=[sys.executable, "-m", "soulwire"])
        self.backend = WarmBackend(settings, engines_per_group=engines)
        self.run_root = Path(run_root) if run_root else None
        self._staged: dict[str, tuple[asyncio.Task[TaskResult], _WorkerSlot]] = {}
        self._ready: asyncio.Event | None = None
        self._host: asyncio.Task[None] | None = None

    async def _hold(self, ready: asyncio.Event) -> None:
        # The warm backend's task group lives in one long-lived task of the actor's event
        # loop (anyio needs it entered and left by the same task); calls come and go.
        async with self.backend:
            ready.set()
            await asyncio.Event().wait()

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._host = asyncio.get_running_loop().create_task(self._hold(self._ready))
        await self._ready.wait()

    async def run(self, task: Task, task_dir: str, record: TaskResult, workspace: Any = None) -> TaskResult:
        """Run one task here; `workspace` is a packed workspace (bytes) when shipped."""
        task, directory = await self._arrive(task, task_dir, record, workspace)
        return await self.backend.run_task(task, directory, record)

    async def stage(self, task: Task, task_dir: str, record: TaskResult, workspace: Any = None) -> None:
        """Prepare a task here (its workspace, its session on a warm engine) and return once
        its turn waits for its place; `go` runs it."""
        task, directory = await self._arrive(task, task_dir, record, workspace)
        slot = _WorkerSlot(record)
        run = asyncio.get_running_loop().create_task(self.backend.run_task(task, directory, record, slot))
        self._staged[task.id] = (run, slot)
        asking = asyncio.ensure_future(slot.asked.wait())
        await asyncio.wait({run, asking}, return_when=asyncio.FIRST_COMPLETED)
        asking.cancel()

    async def go(
        self, task: Task, task_dir: str, record: TaskResult, workspace: Any, started_at: float
    ) -> TaskResult:
        """Run the staged task (the driver holds its place since `started_at`). A worker that
        restarted after `stage` has no such task: it runs it from the start."""
        staged = self._staged.pop(task.id, None)
        if staged is None:
            record.started_at = started_at
            return await self.run(task, task_dir, record, workspace)
        run, slot = staged
        slot.grant(started_at)
        return await run

    async def _arrive(
        self, task: Task, task_dir: str, record: TaskResult, workspace: Any
    ) -> tuple[Task, Path]:
        await self._started()
        directory = Path(task_dir)
        if workspace is not None:  # shipped: unpack beside the task dir and copy from there
            source = directory / "source"
            await asyncio.to_thread(unpack_workspace, workspace, source)
            task = task.model_copy(update={"workspace": source, "workspace_mode": "copy"})
        record.node = os.uname().nodename
        # A call Ray retries after this worker died starts here again: count the runs.
        counter = directory / "attempts"
        directory.mkdir(parents=True, exist_ok=True)
        runs = int(counter.read_text() or 0) + 1 if counter.exists() else 1
        counter.write_text(str(runs))
        record.attempts = runs
        return task, directory

    def pid(self) -> int:
        return os.getpid()


class RayBackend:
    """Runs tasks on a Ray cluster (see the module doc). Use `async with` (the driver does).

    `address`: a cluster to join (`ray://…`, `HOST:PORT`, or `auto`); None starts a local
    one in this process bound to 127.0.0.1. `workers`: actors placed by Ray's scheduler, each
    with `engines_per_worker` engines (default 1); without it, one worker on each node with
    room, with as many engines as the node's CPUs (at most 4) unless `engines_per_worker`
    says otherwise. `resources`: custom resources each worker declares."""

    name = "ray"
    stages = True
    """Tasks are staged on their worker (workspace and session ready) while every place is
    taken: `FleetWorker.stage`, then `go` once the driver holds the task's place."""

    def __init__(
        self,
        settings: EngineSettings | None = None,
        *,
        address: str | None = None,
        workers: int | None = None,
        worker_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        engines_per_worker: int | None = None,
        max_retries: int = 3,
        ship_workspaces: bool = False,
        runtime_env: Mapping[str, Any] | None = None,
        num_cpus: int | None = None,
    ) -> None:
        self.settings = settings or EngineSettings(executable=None)
        self.address = address
        self.workers = workers
        self.worker_cpus = worker_cpus
        self.resources = dict(resources or {})
        self.engines_per_worker = engines_per_worker
        self.max_retries = max_retries
        self.ship_workspaces = ship_workspaces
        self.runtime_env = dict(runtime_env) if runtime_env else None
        self.num_cpus = num_cpus
        self.actors: list[Any] = []
        self.capacity: list[int] = []
        """Each worker's engines."""
        self._in_flight: list[int] = []
        self._owns_ray = False
        self._shipped: dict[Path, Any] = {}

    async def __aenter__(self) -> RayBackend:
        ray = _ray()

        if not ray.is_initialized():
            options: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if self.runtime_env:
                options["runtime_env"] = self.runtime_env
            # A local cluster of this process: its node on 127.0.0.1, though Ray opens its GCS
            # and raylet ports on every interface; Ray's token auth (on by default for a new
            # local cluster, the token in ~/.ray/auth_token) is what keeps others out.
            if self.address is None:
                options.update(_node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=self.num_cpus)
            else:
                options["address"] = self.address
            worker_log = logging.getLogger("ray._private.worker")
            if not any(isinstance(f, _NoSigtermNotice) for f in worker_log.filters):
                worker_log.addFilter(_NoSigtermNotice())
            if self.address is None:
                # Not on a thread that ends: Ray starts the local cluster's processes with a
                # parent-death signal, which the kernel sends when the *thread* that spawned
                # them exits. The executor's threads live as long as the loop.
                await asyncio.to_thread(lambda: ray.init(**options))
            else:
                await asyncio.to_thread(probe_cluster, self.address)
                await _in_daemon_thread(lambda: ray.init(**options))
            self._owns_ray = True
        worker_class = ray.remote(FleetWorker)
        common: dict[str, Any] = {
            "num_cpus": self.worker_cpus,
            "resources": self.resources or None,
            "max_restarts": -1,  # a killed worker comes back (on any node with room)
            "max_task_retries": self.max_retries,  # and its calls in flight run again
            "max_concurrency": 10_000,  # async actor: its tasks interleave on its event loop
        }
        if self.workers is None:
            layout = self._one_per_node(ray)
        else:
            layout = [({}, self.engines_per_worker or 1)] * self.workers
        self.actors = [
            worker_class.options(**common, **placement).remote(self.settings, engines, None)
            for placement, engines in layout
        ]
        self.capacity = [engines for _, engines in layout]
        self._in_flight = [0] * len(self.actors)
        await asyncio.gather(*(actor.pid.remote() for actor in self.actors))  # up before timing
        return self

    async def __aexit__(self, *exc: object) -> None:
        ray = _ray()

        for actor in self.actors:  # their engines die with them (they hold the engines' stdin)
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self._owns_ray:
            await asyncio.to_thread(ray.shutdown)
            self._owns_ray = False

    def _one_per_node(self, ray: Any) -> list[tuple[dict[str, Any], int]]:
        """The default layout: one worker on each live node with room for it, with as many
        engines as the node has CPUs (at most 4). A worker's engines are forked from one
        start-up, and one worker per node pays Ray's per-actor costs once: on one 2-CPU node,
        a fifth less CPU than two 1-engine workers (bench/RESULTS.md §11f). Pinned softly, so
        a worker whose node went away is restarted elsewhere."""
        strategies = importlib.import_module("ray.util.scheduling_strategies")
        layout: list[tuple[dict[str, Any], int]] = []
        for node in ray.nodes():
            resources: dict[str, float] = node.get("Resources") or {}
            cpus = float(resources.get("CPU", 0.0))
            wanted = {"CPU": self.worker_cpus, **self.resources}
            if not node.get("Alive") or any(resources.get(k, 0.0) < v for k, v in wanted.items()):
                continue
            engines = self.engines_per_worker or default_engines_per_group(int(cpus))
            pin = strategies.NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=True)
            layout.append(({"scheduling_strategy": pin}, engines))
        return layout or [({}, self.engines_per_worker or 1)]

    def _workspace_ref(self, task: Task, run_dir: Path) -> Any:
        ray = _ray()

        if not self.ship_workspaces or task.workspace is None:
            return None
        ref = self._shipped.get(task.workspace)
        if ref is None:
            packed = pack_workspace(task.workspace, fleet_outputs(run_dir))
            ref = self._shipped[task.workspace] = ray.put(packed)
        return ref

    async def run_task(
        self, task: Task, task_dir: Path, record: TaskResult, slot: TurnSlot | None = None
    ) -> TaskResult:
        """Run `task` on the least loaded worker: staged there (`stage`), then run once `slot`
        is taken (`go`); without a slot, in one call (`run`)."""
        ray = _ray()
        RayError = importlib.import_module("ray.exceptions").RayError

        # Spread the calls: the worker with the fewest tasks in flight per engine gets the next.
        index = min(range(len(self.actors)), key=lambda i: self._in_flight[i] / self.capacity[i])
        self._in_flight[index] += 1
        actor, shipped, ref = self.actors[index], self._workspace_ref(task, task_dir.parent), None
        try:
            if slot is None:
                ref = actor.run.remote(task, str(task_dir), record, shipped)
            else:
                ref = actor.stage.remote(task, str(task_dir), record, shipped)
                await ref
                await slot.take()
                ref = actor.go.remote(task, str(task_dir), record, shipped, record.started_at or time.time())
            result: TaskResult = await ref
        except asyncio.CancelledError:
            if ref is not None:
                ray.cancel(ref)
            raise
        except RayError as exc:
            result = record.model_copy(
                update={"status": "failed", "reason": f"ray: {type(exc).__name__}: {one_line(exc)}"}
            )
        finally:
            self._in_flight[index] -= 1
        return result

    async def worker_pids(self) -> list[int]:
        """The process ids of the workers (tests kill one)."""
        return list(await asyncio.gather(*(actor.pid.remote() for actor in self.actors)))


__all__ = ["FleetWorker", "RayBackend", "pack_workspace", "unpack_workspace"]
