#!/usr/bin/env python3
"""Fleet throughput and overhead: N tasks x K scripted model calls at concurrency C, run by
`soulwire.fleet` (local backend), against the same sessions driven by bare `soulwire.sdk`
under the same limit (no workspace copy, check, diff or results file). Rounds interleave.

    .venv/bin/python bench/fleet_bench.py --tasks 40 --calls 2 --concurrency 8 --rounds 2

Also times the fleet's own per-task work in-process (workspace copy, diff, result line) on
the workspace the tasks use."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wire_client import scripted_config  # noqa: E402

import soulwire.sdk as sdk  # noqa: E402
from soulwire import fleet  # noqa: E402
from soulwire.fleet.results import ResultsWriter, TaskResult  # noqa: E402
from soulwire.fleet.workspace import prepare_workspace, workspace_diff  # noqa: E402


def make_workspace(root: Path, files: int) -> Path:
    """A small source tree: `files` Python files of ~40 lines."""
    source = root / "source"
    for i in range(files):
        path = source / f"pkg{i % 5}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(20)))
    return source


def make_tasks(root: Path, n: int, calls: int, source: Path) -> list[fleet.Task]:
    scripts = root / "scripts.json"
    # calls-1 steps with a file write, then the answer: each task changes its workspace.
    steps = [
        "tool_call: "
        + json.dumps(
            {
                "id": f"w{k}",
                "name": "WriteFile",
                "arguments": json.dumps({"path": f"out{k}.txt", "content": "x\n"}),
            }
        )
        for k in range(calls - 1)
    ]
    scripts.write_text(json.dumps([*steps, "text: done"]))
    config = scripted_config(scripts)
    lines = [
        json.dumps(
            {"id": f"t{i}", "prompt": "go", "config": config, "approval": "yolo", "workspace": str(source)}
        )
        for i in range(n)
    ]
    return fleet.parse_tasks(lines)


def engine_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_"))}
    env.update({"HOME": str(root / "home"), "KIMI_DISABLE_TELEMETRY": "1"})
    return env


async def run_fleet_round(root: Path, tasks: list[fleet.Task], concurrency: int) -> dict[str, float]:
    settings = fleet.EngineSettings(share_dir=root / "share", env=engine_env(root), inherit_env=False)
    out = root / f"results-{time.monotonic_ns()}.jsonl"
    started = time.perf_counter()
    results = await fleet.run_all(
        tasks, concurrency=concurrency, out=out, backend=fleet.LocalBackend(settings)
    )
    wall = time.perf_counter() - started
    bad = [r for r in results if r.status != "done"]
    if bad:
        raise SystemExit(f"fleet round failed: {bad[0].id} {bad[0].status} {bad[0].reason}")
    return {"wall_s": wall, "task_mean_s": statistics.mean(r.duration_s for r in results)}


async def run_bare_round(root: Path, tasks: list[fleet.Task], concurrency: int) -> dict[str, float]:
    """The same sessions through the SDK alone (each in an empty work dir)."""
    root.mkdir(parents=True, exist_ok=True)
    limiter = anyio.CapacityLimiter(concurrency)
    durations: list[float] = []
    env = engine_env(root)

    async def one(task: fleet.Task) -> None:
        async with limiter:
            t0 = time.perf_counter()
            work = Path(tempfile.mkdtemp(dir=root))
            options = sdk.Options(
                executable=[sys.executable, "-m", "soulwire"],
                work_dir=work,
                config=task.config,
                yolo=True,
                share_dir=root / "share",
                env=env,
                inherit_env=False,
            )
            async with sdk.Session(options) as session:
                await session.prompt(task.prompt)
            durations.append(time.perf_counter() - t0)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for task in tasks:
            group.start_soon(one, task)
    return {"wall_s": time.perf_counter() - started, "task_mean_s": statistics.mean(durations)}


def fleet_own_costs(root: Path, source: Path, repeat: int = 20) -> dict[str, float]:
    """Milliseconds per task of the fleet's own work, in-process."""
    copy, diff, write = [], [], []
    writer = ResultsWriter(root / "own-costs.jsonl")
    for i in range(repeat):
        dest = root / "own" / f"w{i}"
        t0 = time.perf_counter()
        prepare_workspace(source, dest)
        t1 = time.perf_counter()
        (dest / "out0.txt").write_text("x\n")
        t2 = time.perf_counter()
        text, _ = workspace_diff(source, dest)
        t3 = time.perf_counter()
        writer.write(TaskResult(id=f"w{i}", status="done", diff=text))
        t4 = time.perf_counter()
        copy.append(t1 - t0)
        diff.append(t3 - t2)
        write.append(t4 - t3)
    writer.close()
    return {
        name: statistics.median(values) * 1000
        for name, values in (("copy", copy), ("diff", diff), ("write", write))
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--calls", type=int, default=2, help="model calls per task (>= 1)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--files", type=int, default=50, help="files in the task workspace")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        source = make_workspace(root, args.files)
        tasks = make_tasks(root, args.tasks, args.calls, source)
        rounds: dict[str, list[dict[str, float]]] = {"fleet": [], "bare SDK": []}
        for i in range(args.rounds):
            rounds["fleet"].append(await run_fleet_round(root / f"f{i}", tasks, args.concurrency))
            rounds["bare SDK"].append(await run_bare_round(root / f"b{i}", tasks, args.concurrency))
        own = fleet_own_costs(root, source)
    load = os.getloadavg()[0]
    print(
        f"{args.tasks} tasks x {args.calls} scripted calls, concurrency {args.concurrency}, "
        f"{args.files}-file workspace, {args.rounds} rounds; {os.cpu_count()} CPUs, "
        f"load {load:.1f}, Python {platform.python_version()}\n"
    )
    print("| run | wall (median) | per task, wall / tasks | mean task duration |")
    print("| --- | --- | --- | --- |")
    for name, values in rounds.items():
        wall = statistics.median(v["wall_s"] for v in values)
        mean = statistics.median(v["task_mean_s"] for v in values)
        print(f"| {name} | {wall:.2f} s | {wall / args.tasks * 1000:.0f} ms | {mean:.2f} s |")
    fleet_wall = statistics.median(v["wall_s"] for v in rounds["fleet"])
    bare_wall = statistics.median(v["wall_s"] for v in rounds["bare SDK"])
    print(f"\nfleet - bare SDK: {(fleet_wall - bare_wall) / args.tasks * 1000:+.0f} ms per task of wall time")
    print(
        f"fleet's own work per task (in-process medians): copy {own['copy']:.1f} ms, "
        f"diff {own['diff']:.1f} ms, result line {own['write']:.2f} ms"
    )


if __name__ == "__main__":
    anyio.run(main)
