#!/usr/bin/env python3
"""The issue-18 fleet benchmark: N tasks x K model calls at concurrency C against a fake
provider with L seconds of latency per call (bench/latency_provider.py, a real HTTP server
speaking the OpenAI Chat Completions stream). Ideal wall time: ceil(N / C) * K * L.

Runs, each from the command line as a person would, wall clock from spawn to exit:

* `fleet-warm`:  `soulwire fleet run TASKS -j C` (warm `soulwire serve` engines)
* `fleet-fresh`: the same with `--engines fresh` (a new engine process per task)
* `fleet-ray`:   `soulwire fleet run --backend ray --address ADDR` on a local Ray cluster
  started before timing (`--ray`)
* `xargs-soulwire`: `xargs -P C` running `soulwire --print` once per task
* `xargs-kimi`: the same with the reference `kimi --print` (`--kimi PATH`)

Peak memory: RSS of every process under the run, sampled every 100 ms from /proc; the
per-session figure is the peak over C. Also prints the load average before and after.

    .venv/bin/python bench/fleet_latency_bench.py --tasks 200 --calls 3 --concurrency 50 \\
        --latency 0.5 --kimi /tmp/kimi313/bin/kimi --runs fleet-warm,xargs-soulwire,xargs-kimi
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in (p.name for p in Path("/proc").iterdir()):
        if not entry.isdigit():
            continue
        try:
            with Path(f"/proc/{entry}/stat").open("rb") as handle:
                data = handle.read()
        except OSError:
            continue
        parent = int(data[data.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def rss_kib(pid: int) -> int:
    try:
        with Path(f"/proc/{pid}/status").open(encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, str]:
    """(user + system CPU seconds, a short kind: `soulwire serve`, `soulwire fleet`, …)."""
    try:
        with Path(f"/proc/{pid}/stat").open("rb") as handle:
            data = handle.read()
        with Path(f"/proc/{pid}/cmdline").open("rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return 0.0, ""
    if not any(argv):  # a zombie: its CPU was already counted while it ran
        return 0.0, ""
    fields = data[data.rindex(b")") + 2 :].split()
    seconds = (int(fields[11]) + int(fields[12])) / TICKS
    words = [Path(a.decode(errors="replace")).name for a in argv if a and not a.startswith(b"-")][:3]
    if words and words[0].startswith("ray::"):  # `ray::FleetWorker.run` → `ray::FleetWorker`
        name = words[0].split(".", 1)[0]
    elif "serve" in words:
        name = "soulwire serve"
    elif "fleet" in words:
        name = "soulwire fleet"
    else:
        name = next((w for w in words if w not in ("python", "python3", "sh")), words[0] if words else "?")
    return seconds, name


class PeakMemory:
    """Samples the summed RSS of a process tree until stopped."""

    def __init__(self, root: int, *more: int) -> None:
        self.roots = [root, *more]
        self.peak_kib = 0
        self.peak_processes = 0
        self.cpu: dict[int, tuple[float, str]] = {}
        """pid → (CPU seconds so far, its kind as last seen): one process is counted once,
        though Ray retitles its workers as they run calls."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            pids = [pid for root in self.roots for pid in descendants(root)]
            total = sum(rss_kib(p) for p in pids)
            if total > self.peak_kib:
                self.peak_kib, self.peak_processes = total, len(pids)
            for pid in pids:
                seconds, name = cpu_seconds(pid)
                if seconds:
                    self.cpu[pid] = (seconds, name)

    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds (user + system) by command kind, as last seen alive."""
        kinds: dict[str, float] = {}
        for seconds, name in self.cpu.values():
            kinds[name] = round(kinds.get(name, 0.0) + seconds, 2)
        return kinds

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def start_provider(latency: float, calls: int) -> tuple[subprocess.Popen[str], str]:
    script = ROOT / "bench" / "latency_provider.py"
    argv = [sys.executable, str(script), "--latency", str(latency), "--calls", str(calls)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def provider_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/stats", timeout=10) as response:
        return json.loads(response.read())


def make_config(root: Path, url: str) -> Path:
    config = {
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "fake-latency", "max_context_size": 100000}},
        "providers": {"p": {"type": "openai_legacy", "base_url": url + "/v1", "api_key": "k"}},
    }
    path = root / "config.json"
    path.write_text(json.dumps(config))
    return path


def make_workspace(root: Path, files: int) -> Path:
    source = root / "source"
    for i in range(files):
        path = source / f"pkg{i % 5}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(20)))
    return source


def isolated_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
    env.update(
        HOME=str(root / "home"),
        SOULWIRE_SHARE_DIR=str(root / "share"),
        KIMI_SHARE_DIR=str(root / "kimi-share"),
        KIMI_DISABLE_TELEMETRY="1",
    )
    (root / "home").mkdir(exist_ok=True)
    return env


def timed(
    argv: list[str], env: dict[str, str], cwd: Path, log: Path, also: tuple[int, ...] = ()
) -> tuple[float, PeakMemory, int]:
    """Wall time of the command; memory and CPU of its process tree (and of `also`'s trees)."""
    global SPAWNED_AT
    SPAWNED_AT = time.time()
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        memory = PeakMemory(proc.pid, *also)
        code = proc.wait()
    wall = time.perf_counter() - started
    memory.stop()
    return wall, memory, code


def run_fleet(
    name: str, args: argparse.Namespace, url: str, extra: list[str], also: tuple[int, ...] = ()
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"fleetbench-{name}-"))
    try:
        config = make_config(root, url)
        source = make_workspace(root, args.files)
        tasks = root / "tasks.jsonl"
        with tasks.open("w") as handle:
            for i in range(args.tasks):
                line = {
                    "id": f"t{i:04d}",
                    "prompt": f"task {i}: write the step files",
                    "workspace": str(source),
                    "config_file": str(config),
                    "approval": "yolo",
                    "time_limit": 300,
                }
                handle.write(json.dumps(line) + "\n")
        argv = [str(VENV_BIN / "soulwire"), "fleet", "run", str(tasks), "-j", str(args.concurrency)]
        argv += ["--json", *extra]
        wall, memory, code = timed(argv, isolated_env(root), root, root / "fleet.log", also)
        results = [json.loads(line) for line in (root / "tasks.results.jsonl").read_text().splitlines()]
        statuses: dict[str, int] = {}
        for r in results:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        steps = sorted(r["steps"] for r in results)
        # From the first task's start to the last one's end: the run once the fleet is up (its
        # engines or Ray workers started), as the issue times the Ray cluster.
        first = min(r["started_at"] for r in results)
        last = max(r["finished_at"] for r in results)
        span = last - first
        record = summary(name, wall, memory, code, args)
        record["span_s"] = round(span, 2)
        record["span_x_ideal"] = round(span / record["ideal_s"], 2) if record["ideal_s"] else None
        # Where the wall time went: until the first task held its place (the driver and the
        # engines starting; with staging, also the first session's set-up), the tasks, and
        # from the last result to the exit (the engines stopping, the driver exiting).
        record["first_start_s"] = round(first - SPAWNED_AT, 2)
        record["exit_after_last_s"] = round(wall - (last - SPAWNED_AT), 2)
        record.update(statuses=statuses, steps_min=steps[0] if steps else 0)
        record["steps_max"] = steps[-1] if steps else 0
        return record
    finally:
        if not args.keep:
            LEFT_FOR_THE_END.append(root)


def run_xargs(name: str, args: argparse.Namespace, url: str, engine: str) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"fleetbench-{name}-"))
    try:
        config = make_config(root, url)
        source = make_workspace(root, args.files)
        work = root / "work"
        work.mkdir()
        # The naive loop people write: copy the workspace, run the agent once, in parallel.
        w = shlex.quote(str(work))
        one = (
            f"cp -r {shlex.quote(str(source))} {w}/$0 && "
            f"{shlex.quote(engine)} --print --yolo --config-file {shlex.quote(str(config))} "
            f'--work-dir {w}/$0 -p "task $0: write the step files" > {w}/$0.out 2>&1'
        )
        script = f"seq -w 0 {args.tasks - 1} | xargs -P {args.concurrency} -n 1 sh -c {shlex.quote(one)}"
        wall, memory, code = timed(["sh", "-c", script], isolated_env(root), root, root / "xargs.log")
        done = sum(
            1
            for i in range(args.tasks)
            if (work / f"{i:0{len(str(args.tasks - 1))}d}" / f"step{args.calls - 2}.txt").exists()
        )
        record = summary(name, wall, memory, code, args)
        record["finished_tasks"] = done
        return record
    finally:
        if not args.keep:
            LEFT_FOR_THE_END.append(root)


def summary(
    name: str, wall: float, memory: PeakMemory, code: int, args: argparse.Namespace
) -> dict[str, Any]:
    ideal = math.ceil(args.tasks / args.concurrency) * args.calls * args.latency
    return {
        "run": name,
        "exit": code,
        "wall_s": round(wall, 2),
        "ideal_s": ideal,
        "x_ideal": round(wall / ideal, 2) if ideal else None,
        "peak_rss_mib": round(memory.peak_kib / 1024, 1),
        "peak_processes": memory.peak_processes,
        "rss_per_session_mib": round(memory.peak_kib / 1024 / args.concurrency, 1),
        "load_before": os.getloadavg()[0],
        "cpu_s": memory.cpu_by_kind(),
    }


def overhead(args: argparse.Namespace, url: str, repeat: int = 30) -> dict[str, Any]:
    """The fleet's own costs per task, in-process (milliseconds, medians): starting a warm
    engine (once per engine, not per task), opening a session on it (HTTP create, WebSocket
    attach, `initialize`), and the workspace copy, diff and fsynced result line."""
    import statistics

    import anyio

    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    from fleet_bench import fleet_own_costs  # pyright: ignore[reportMissingImports]

    from soulwire.fleet import EngineSettings, Task
    from soulwire.fleet.warm import GroupKey, WarmBackend, start_engine
    from soulwire.sdk.remote import RemoteSession

    root = Path(tempfile.mkdtemp(prefix="fleetbench-overhead-"))
    config = make_config(root, url)
    source = make_workspace(root, args.files)
    os.environ.update(isolated_env(root))
    task = Task(id="x", prompt="p", config_file=config, approval="yolo")
    record: dict[str, Any] = {"run": "overhead"}

    async def measure() -> None:
        settings = EngineSettings()
        async with WarmBackend(settings) as backend:
            t0 = time.perf_counter()
            engine, pump = await start_engine(settings, GroupKey.of(task).flags, {}, work_dir=root)
            record["engine_start_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            backend.start_soon(pump)
            opens: list[float] = []
            for i in range(repeat):
                work = root / "open" / str(i)
                work.mkdir(parents=True)
                t0 = time.perf_counter()
                server = engine.url.replace("http://", "ws://")
                async with RemoteSession.create(server, engine.token, work_dir=str(work)) as session:
                    await session.call("requests/pending")  # answered after `initialize`
                    opens.append(time.perf_counter() - t0)
            record["session_open_ms"] = round(statistics.median(opens) * 1000, 1)
            from soulwire.fleet.warm import stop_engine

            await stop_engine(engine, 5)

    anyio.run(measure)
    own = fleet_own_costs(root, source)
    record.update({f"{name}_ms": round(value, 1) for name, value in own.items()})
    shutil.rmtree(root, ignore_errors=True)
    return record


def start_ray_head(cpus: int) -> tuple[subprocess.Popen[bytes], str, Path]:
    """`ray start --head --block` on 127.0.0.1 in its own process group; waits until it is up
    (the benchmark times the fleet on a running cluster, as the issue asks)."""
    import socket

    temp = Path(tempfile.mkdtemp(prefix="swray-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [
        str(VENV_BIN / "ray"), "start", "--head", "--block", "--port", str(port),
        "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus), "--disable-usage-stats",
        "--include-dashboard", "false", "--include-log-monitor", "false", "--temp-dir", str(temp),
    ]  # fmt: skip
    head = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 180
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if head.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the local Ray cluster did not start") from None
            time.sleep(0.5)
    time.sleep(5)  # the raylet registers after the GCS port opens
    return head, f"127.0.0.1:{port}", temp


def stop_ray_head(head: subprocess.Popen[bytes], temp: Path) -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            break
        try:
            head.wait(timeout=15)
            time.sleep(1)
        except subprocess.TimeoutExpired:
            continue
    shutil.rmtree(temp, ignore_errors=True)


SPAWNED_AT = 0.0
"""time.time() when the last timed command was spawned."""

LEFT_FOR_THE_END: list[Path] = []
"""Run directories, removed after the last run: on ext4 without a journal (this machine's
root file system) creating files soon after thousands were deleted scans the deleted inodes
(the kernel's `recently_deleted`), which made each run pay for the previous run's clean-up:
half of the driver's CPU in one profile (bench/RESULTS.md §11e)."""


def settle() -> None:
    """Before a run: write back what earlier runs left dirty, so their deleted inodes are
    no longer "recent" for long (5 s once clean, 300 s while dirty)."""
    os.sync()
    time.sleep(6)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--files", type=int, default=20, help="files in each task's workspace")
    parser.add_argument("--runs", default="fleet-warm,xargs-soulwire")
    parser.add_argument("--kimi", help="the reference engine, for xargs-kimi")
    parser.add_argument("--ray-address", help="a running Ray cluster for fleet-ray (default: start one)")
    parser.add_argument("--engines-per-group", type=int, help="fleet-warm: serve processes")
    parser.add_argument("--ray-flags", default="", help="fleet-ray: more `fleet run` flags")
    parser.add_argument("--fleet-flags", default="", help="fleet-warm: more `fleet run` flags")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--json-out", help="append the records here as JSON lines")
    args = parser.parse_args()
    provider, url = start_provider(args.latency, args.calls)
    try:
        for name in args.runs.split(","):
            settle()
            before = provider_stats(url)["requests"]
            provider_cpu = cpu_seconds(provider.pid)[0]
            load = os.getloadavg()[0]
            if name == "fleet-warm":
                extra = ["--engines-per-group", str(args.engines_per_group)] if args.engines_per_group else []
                extra += shlex.split(args.fleet_flags)
                record = run_fleet(name, args, url, extra)
            elif name == "fleet-fresh":
                record = run_fleet(name, args, url, ["--engines", "fresh"])
            elif name == "fleet-ray":
                head = None
                address = args.ray_address
                if address is None:
                    head, address, temp = start_ray_head(os.cpu_count() or 2)
                try:
                    also = (head.pid,) if head is not None else ()
                    flags = ["--backend", "ray", "--address", address, *shlex.split(args.ray_flags)]
                    record = run_fleet(name, args, url, flags, also)
                finally:
                    if head is not None:
                        stop_ray_head(head, temp)
            elif name == "overhead":
                record = overhead(args, url)
            elif name == "xargs-soulwire":
                record = run_xargs(name, args, url, str(VENV_BIN / "soulwire"))
            elif name == "xargs-kimi":
                if not args.kimi:
                    parser.error("xargs-kimi needs --kimi PATH")
                record = run_xargs(name, args, url, args.kimi)
            else:
                parser.error(f"unknown run {name}")
            record["load_before"] = load
            record["load_after"] = os.getloadavg()[0]
            record["model_calls"] = provider_stats(url)["requests"] - before
            # The fake provider shares the cores too (not in cpu_s: it is not the fleet's).
            record["provider_cpu_s"] = round(cpu_seconds(provider.pid)[0] - provider_cpu, 2)
            print(json.dumps(record), flush=True)
            if args.json_out:
                with Path(args.json_out).open("a") as handle:
                    handle.write(json.dumps(record) + "\n")
    finally:
        provider.terminate()
        provider.wait()
        for root in LEFT_FOR_THE_END:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
