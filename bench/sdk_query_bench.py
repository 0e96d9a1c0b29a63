#!/usr/bin/env python3
"""`query()` against the bare engine (issue 19's speed targets), interleaved run by run:

1. spawn -> first message: the raw stdlib client of wire_bench.py (spawn, `initialize`,
   `prompt`, first ContentPart) vs `query()` (spawn inside it, handshake, prompt, first
   yielded message), with a one-chunk scripted reply;
2. a whole run that streams N chunks: raw client (spawn -> prompt response) vs `query()`
   (call -> ResultMessage), and the engine's own event rate (raw client, first to last chunk);
3. the SDK's own CPU per streamed event with no engine at all (`sdk_bench.client_ceiling`
   + `sdk_bench.query_ceiling`), as a share of the engine's time per event.

    .venv/bin/python bench/sdk_query_bench.py --repeat 15 --stream 50000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sdk_bench import client_ceiling, load_wire_bench, query_ceiling


def raw_first(wb: Any, flavor: Any, root: Path, scripts: list[str], timeout: float) -> dict[str, float]:
    """Spawn -> first ContentPart and spawn -> prompt answered, and the receive-window rate."""
    times: list[float] = []

    def on_msg(t: float, msg: dict[str, Any]) -> None:
        if msg.get("method") == "event" and (msg.get("params") or {}).get("type") == "ContentPart":
            times.append(t)

    with wb.Session(flavor, scripts, True, root) as s:
        t0 = s.client.t_spawn
        s.initialize(timeout)
        _, t_done, _ = s.prompt("go", timeout, on_msg=on_msg)
    out = {"first (ms)": (times[0] - t0) * 1e3, "run (ms)": (t_done - t0) * 1e3}
    if len(times) > 1:
        out["engine us/event"] = (times[-1] - times[0]) / (len(times) - 1) * 1e6
    return out


async def query_first(wb: Any, flavor: Any, root: Path, scripts: list[str]) -> dict[str, float]:
    from soulwire.sdk import Options, ResultMessage, query

    run_dir = Path(tempfile.mkdtemp(prefix="q-run-", dir=root))
    spec = flavor.prepare(run_dir, scripts, yolo=True)
    args = [a for a in spec.argv[1:] if a != "--wire"]
    options = Options(executable=spec.argv[0], args=args, env=spec.env, inherit_env=False, work_dir=spec.cwd)
    perf = time.perf_counter
    t0 = perf()
    first: float | None = None
    result: float | None = None
    async for message in query("go", options):
        if first is None:
            first = perf()
        if type(message) is ResultMessage:
            result = perf()
            assert message.stop_reason == "finished", message
    t_closed = perf()
    shutil.rmtree(run_dir, ignore_errors=True)
    assert first is not None and result is not None
    return {
        "first (ms)": (first - t0) * 1e3,
        "run (ms)": (result - t0) * 1e3,  # the ResultMessage: the prompt's answer, like the raw client's
        "run + close (ms)": (t_closed - t0) * 1e3,  # query() also ends the engine before it returns
    }


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench-dir", default="/work/shared/bench", help="where wire_bench.py lives")
    p.add_argument("--cmd", default=str(Path(sys.executable).with_name("soulwire")), help="engine command")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--stream", type=int, default=50000, help="chunks in the streaming run")
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    wb = load_wire_bench(Path(args.bench_dir))
    flavor = wb.load_flavor("kimi", args.cmd, None)
    root = Path(tempfile.mkdtemp(prefix="sdk-query-bench-"))
    small = [wb.dsl_text("hello")]
    big = wb.script_stream(args.stream)
    results: dict[str, dict[str, list[float]]] = {}
    loads = [os.getloadavg()[0]]

    def record(key: str, out: dict[str, float]) -> None:
        for metric, value in out.items():
            results.setdefault(key, {}).setdefault(metric, []).append(value)

    try:
        raw_first(wb, flavor, root, small, args.timeout)  # warm-up: page cache, .pyc files
        asyncio.run(query_first(wb, flavor, root, small))
        for i in range(args.repeat):
            order = ("raw", "query") if i % 2 == 0 else ("query", "raw")
            for client in order:
                for label, scripts in (("first", small), ("stream", big)):
                    if client == "raw":
                        out = raw_first(wb, flavor, root, scripts, args.timeout)
                    else:
                        out = asyncio.run(query_first(wb, flavor, root, scripts))
                    record(f"{client} {label}", out)
            # the no-engine CPU costs, measured between runs; the minimum is the least disturbed
            record("ceiling", {"turn": client_ceiling(args.stream, record_chunks=False)})
            record("ceiling", {"fold": query_ceiling(args.stream)})
            loads.append(os.getloadavg()[0])
            print(f"run {i + 1}/{args.repeat} done (load {loads[-1]:.1f})", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def m(key: str, metric: str) -> float:
        return median(results[key][metric])

    engine_us = m("raw stream", "engine us/event")
    sdk_us, fold_us = min(results["ceiling"]["turn"]), min(results["ceiling"]["fold"])
    raw_start, query_start = m("raw first", "first (ms)"), m("query first", "first (ms)")
    span = f"{min(loads):.1f}-{max(loads):.1f}"
    print(f"load average over the runs: {span}; {args.repeat} interleaved runs, medians\n")
    print("| measure | bare engine (raw client) | query() | ratio / share |")
    print("| --- | ---: | ---: | ---: |")
    ratio = query_start / raw_start
    print(f"| spawn -> first message (ms) | {raw_start:.1f} | {query_start:.1f} | {ratio:.2f}x |")
    raw_run, query_run = m("raw stream", "run (ms)"), m("query stream", "run (ms)")
    print(
        f"| whole run, {args.stream} chunks (ms) | {raw_run:.1f} | {query_run:.1f} | "
        f"{(query_run / raw_run - 1) * 100:+.1f}% |"
    )
    closing = m("query stream", "run + close (ms)")
    print(f"| the same, query() until it returned (engine closed) (ms) | | {closing:.1f} | |")
    print(f"| engine's own time per event (us) | {engine_us:.2f} | | |")
    print(
        f"| SDK CPU per event, no engine (min of runs, us): Turn {sdk_us:.2f} + fold {fold_us:.2f} | | "
        f"{sdk_us + fold_us:.2f} | {(sdk_us + fold_us) / engine_us * 100:.1f}% of the engine's |"
    )
    share = fold_us / engine_us * 100
    print(f"| query()'s message layer alone per event (us) | | {fold_us:.2f} | {share:.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
