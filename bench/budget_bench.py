"""The cost of budget accounting on a 1,000-step turn (issue #36: ≤ 1% of the engine's time per
step).

One turn of N steps, in process, on the `_scripted_echo` model (each step reports usage and
asks for one ReadFile of a small file, the last answers), run three ways, interleaved so that
they share the machine's load:

- `off`: no meter at all (the engine as it was before budgets);
- `unlimited`: the meter every session has, no limit set (what everyone pays);
- `limited`: every limit at every scope (12 limits, priced money, warnings, BudgetUpdate events
  recorded in wire.jsonl and saved to state.json at each step).

It prints the CPU time per step of each and the difference to `off`, and (`--micro`) the
accounting calls alone, timed without the engine around them.

    .venv/bin/python bench/budget_bench.py --steps 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from scripted_config import scripted_config

MODES = ("off", "unlimited", "limited")
PRICES = {"scripted_echo": {"input": 1.0, "output": 2.0}}
LIMITS = {"usd": 1e9, "tokens": 10**15, "time_s": 1e9, "tool_calls": 10**9}


def scripts(steps: int) -> list[str]:
    usage = 'usage: {"input_other": 1000, "output": 50}'
    call = "tool_call: " + json.dumps(
        {"id": "c{}", "name": "ReadFile", "arguments": json.dumps({"path": "a.txt"})}
    )
    return [call.replace("c{}", f"c{i}") + "\n" + usage for i in range(steps - 1)] + [f"text: done\n{usage}"]


def config(root: Path, mode: str) -> dict[str, Any]:
    raw = scripted_config(
        root / "scripts.json",
        max_context_size=10**9,
        loop_control={"max_steps_per_turn": 100_000},
        prices=PRICES,
    )
    if mode == "limited":
        raw["budgets"] = {"turn": LIMITS, "session": LIMITS, "tree": LIMITS}
    return raw


def one_turn(steps: int, mode: str) -> float:
    """CPU seconds of one N-step turn in a fresh session (the session's building excluded)."""
    from soulwire.runtime.builder import build_runtime
    from soulwire.runtime.options import SessionOptions

    root = Path(tempfile.mkdtemp(prefix="budget-bench-"))
    work, share = root / "work", root / "share"
    work.mkdir()
    share.mkdir()
    (work / "a.txt").write_text("hello\n")
    (root / "scripts.json").write_text(json.dumps(scripts(steps)))
    options = SessionOptions(work_dir=work, share_dir=share, raw_config=config(root, mode), yolo=True)
    runtime = build_runtime(options)
    if mode == "off":
        runtime.soul.meter = None
    elapsed = 0.0

    async def run() -> None:
        nonlocal elapsed
        async with runtime.running(wait_for_start=True):
            start = time.process_time()
            outcome = await runtime.soul.run("go")
            elapsed = time.process_time() - start
            assert outcome.status == "finished", outcome

    try:
        anyio.run(run)
    finally:
        runtime.close()
    return elapsed


def micro(steps: int) -> dict[str, float]:
    """µs per step of the accounting a step does, alone (no engine around them): the check
    before the call (with the input floor, which asks whether a compaction is due first), the
    charge, the tool calls' admission."""
    from soulwire.config.model import LoopControl
    from soulwire.engine.budget import Ledger, Meter
    from soulwire.engine.compaction import compaction_due
    from soulwire.wire.budget import Budget
    from soulwire.wire.pricing import parse_prices
    from soulwire.wire.types import TokenUsage

    usage = TokenUsage(input_other=1000, output=50)
    loop = LoopControl()
    out: dict[str, float] = {}
    for mode in ("unlimited", "limited"):
        budget = Budget.model_validate(config(Path(), mode).get("budgets", {}))
        events: list[Any] = []
        batches: list[float] = []
        for _ in range(7):  # CPU time, the median batch: a shared machine preempts us
            meter = Meter(Ledger(budget, parse_prices(PRICES), events.append))
            meter.turn_begin()
            start = time.process_time()
            for _ in range(steps):
                floor = 0 if compaction_due(1000, 10**9, loop) else 1000  # the soul's input floor
                meter.stop_before_call(floor, "scripted_echo")
                meter.charge(usage, "scripted_echo")
                meter.admit_tool_calls(1)
            batches.append((time.process_time() - start) / steps * 1e6)
            meter.turn_end()
        out[mode] = statistics.median(batches)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--micro", action="store_true", help="also time the accounting calls alone")
    args = parser.parse_args()
    one_turn(20, "limited")  # imports, validators and caches warmed before anything is timed
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(args.repeat):
        for mode in MODES:
            times[mode].append(one_turn(args.steps, mode))
    base = statistics.median(times["off"]) / args.steps * 1e3
    print(f"{args.steps}-step turn, median of {args.repeat}, CPU ms per step:")
    for mode in MODES:
        per_step = statistics.median(times[mode]) / args.steps * 1e3
        print(f"  {mode:10} {per_step:7.3f} ms   {100 * (per_step - base) / base:+6.2f}% vs off")
    if args.micro:
        for mode, us in micro(args.steps).items():
            share = 100 * us / 1e3 / base
            print(f"  accounting calls alone, {mode:9}: {us:6.1f} µs per step ({share:.2f}% of off)")


if __name__ == "__main__":
    main()
