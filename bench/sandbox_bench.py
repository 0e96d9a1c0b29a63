"""What the sandbox costs per Shell call: bubblewrap vs the bare command.

Two views, each interleaved round by round so that all variants share the machine's load:

* `process`: one `bash -c 'echo step'` through `run_captured` (what Shell does), bare and
  wrapped by `SandboxPolicy.command_argv` in each mode; median ms per call.
* `engine`: a warm `soulwire --wire --yolo` running a K-step Shell loop (bench/tool_steps.py),
  `--sandbox off` vs sandboxed; median ms per step.

    .venv/bin/python bench/sandbox_bench.py [--calls 100] [--steps 50] [--repeat 5]

Goal (issue 21): ≤ 10 ms overhead per Shell call."""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from soulwire.tools.builtin.process import Capture, run_captured
from soulwire.tools.sandbox import SandboxPolicy, bubblewrap_problem

sys.path.insert(0, str(Path(__file__).parent))
from tool_steps import steps_ms

VARIANTS: dict[str, tuple[str, bool] | None] = {
    "bare": None,
    "workspace-write": ("workspace-write", False),
    "workspace-write + network": ("workspace-write", True),
    "read-only": ("read-only", False),
}


async def _calls_ms(
    argv: list[str], env: dict[str, str] | None, cwd: Path, calls: int
) -> tuple[float, float]:
    """(wall ms, CPU ms of the child processes) per call."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for _ in range(calls):
        out = Capture(head=4096)
        finished = await run_captured(argv, cwd=cwd, timeout=30, out=out, env=env)
        if finished.returncode != 0 or out.text() != "step\n":
            raise RuntimeError(f"{argv[:3]}…: exit {finished.returncode}, output {out.text()!r}")
    wall = (time.perf_counter() - start) / calls * 1e3
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / calls * 1e3
    return wall, cpu


def process_view(calls: int, repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    root = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    work = root / "work"
    work.mkdir()
    bash = shutil.which("bash") or "bash"
    command = [bash, "-c", "echo step"]
    policies = {
        name: SandboxPolicy.create(v[0], network=v[1], work_dir=work)  # type: ignore[arg-type]
        for name, v in VARIANTS.items()
        if v is not None
    }
    wall: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        for _ in range(repeat):
            for name in VARIANTS:
                policy = policies.get(name)
                argv = policy.command_argv(command, cwd=work) if policy else command
                env = policy.command_env(None) if policy else None
                wall_ms, cpu_ms = anyio.run(_calls_ms, argv, env, work, calls)
                wall[name].append(wall_ms)
                cpu[name].append(cpu_ms)
    finally:
        for policy in policies.values():
            policy.close()
        shutil.rmtree(root, ignore_errors=True)
    return wall, cpu


def engine_view(steps: int, repeat: int) -> dict[str, list[float]]:
    soulwire = str(Path(sys.executable).with_name("soulwire"))
    modes = {
        "--sandbox off": ("--sandbox", "off"),
        "--sandbox workspace-write": ("--sandbox", "workspace-write"),
    }
    samples: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(repeat):
        for name, extra in modes.items():
            samples[name].append(steps_ms(soulwire, steps, True, extra)[0])
    return samples


def table(title: str, samples: dict[str, list[float]], unit: str) -> None:
    base = statistics.median(next(iter(samples.values())))
    print(f"\n{title}\n")
    print(f"| variant | {unit} (median) | min | max | overhead vs first row |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {min(values):.2f} | {max(values):.2f} | {median - base:+.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100, help="calls per variant and round (process view)")
    parser.add_argument("--steps", type=int, default=50, help="Shell steps per turn (engine view)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    problem = bubblewrap_problem()
    if problem is not None:
        print(f"sandbox_bench: {problem}", file=sys.stderr)
        return 2
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    wall, cpu = process_view(args.calls, args.repeat)
    table("Process view: wall ms per `bash -c 'echo step'` via run_captured", wall, "ms per call")
    table("Process view: CPU ms of the child processes per call", cpu, "CPU ms per call")
    engine = engine_view(args.steps, args.repeat)
    title = f"Engine view: ms per Shell step ({args.steps}-step turn, warm engine, --yolo)"
    table(title, engine, "ms per step")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
