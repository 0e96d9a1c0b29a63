"""How fast `cancel` ends a turn whose Shell command is still running, and what is left.

The behaviour (the turn ends, the command's whole process group is gone, the next turn runs)
is tested in `tests/e2e/test_shell_tool.py` with generous bounds; how fast it happens is
measured here, so that a slow machine cannot fail a test and a slow cancel cannot hide in one.

    .venv/bin/python bench/cancel_bench.py --runs 10

Each run starts `soulwire --wire` with the scripted provider, has it run
`sleep N & sleep N; wait` under `--yolo`, waits until both sleeps run, sends `cancel` and
times the prompt's answer. Prints one JSON line: the median, min and max in ms and how many
processes were left running (0 expected)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.test_shell_tool import processes_running, wait_until_gone
from tests.tool_calls import call
from tests.wire_client import Sandbox, WireProcess


def one_run() -> tuple[float, int]:
    """(cancel → answer in ms, processes left running a second later)."""
    duration = f"600.{uuid.uuid4().int % 10**6:06d}"
    with tempfile.TemporaryDirectory(prefix="cancel-bench-") as root:
        sandbox = Sandbox(
            Path(root),
            scripts=[call("c1", "Shell", {"command": f"sleep {duration} & sleep {duration}; wait"})],
        )
        sandbox.write()
        wire = WireProcess(sandbox.argv("--yolo"), sandbox.env(), sandbox.work)
        try:
            wire.initialize()
            rid = wire.request("prompt", {"user_input": "sleep"})
            deadline = time.monotonic() + 30
            while len(processes_running(duration)) < 2:
                if time.monotonic() > deadline:
                    raise RuntimeError("the command never started")
                time.sleep(0.002)
            started = time.perf_counter()
            wire.request("cancel")
            _, response = wire.until_response(rid, timeout=60)
            elapsed_ms = (time.perf_counter() - started) * 1e3
            if response.get("result") != {"status": "cancelled"}:
                raise RuntimeError(f"unexpected answer: {response}")
            return elapsed_ms, len(wait_until_gone(duration, limit=1.0))
        finally:
            wire.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    times: list[float] = []
    left = 0
    for _ in range(args.runs):
        elapsed, remaining = one_run()
        times.append(elapsed)
        left += remaining
    print(
        json.dumps(
            {
                "runs": args.runs,
                "cancel_to_answer_ms": {
                    "median": round(statistics.median(times), 1),
                    "min": round(min(times), 1),
                    "max": round(max(times), 1),
                },
                "processes_left": left,
            }
        )
    )


if __name__ == "__main__":
    main()
