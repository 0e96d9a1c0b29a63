"""Streaming on a warm engine, side by side: prompt → first ContentPart and events/s.

wire_bench.py's stream scenario sends its prompt right after `initialize`, so for an engine
that answers `initialize` before it has finished loading (Soulwire's lean start-up path) the
first ContentPart also waits for the rest of the start-up. Here a warm-up prompt goes first.

    python3 bench/warm_stream.py --cmd soulwire=/path/to/soulwire --cmd kimi=/path/to/kimi \\
        --sizes 1000,10000,50000,100000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tool_steps import Engine


def stream_once(command: str, n: int) -> tuple[float, float]:
    """(ms from prompt to the first ContentPart, ContentPart events per second over the turn)."""
    script = "\n".join(f"text: tok{i} " for i in range(n))
    engine = Engine(command, ["text: warm", script], yolo=True)
    try:
        engine.call("initialize", {"protocol_version": "1.3"})
        engine.call("prompt", {"user_input": "warm up"})
        engine.count += 1
        rid = f"prompt-{engine.count}"
        start = time.perf_counter()
        engine.send({"jsonrpc": "2.0", "id": rid, "method": "prompt", "params": {"user_input": "stream"}})
        first, parts = 0.0, 0
        while True:
            message = engine.inbox.get(timeout=120)
            if message is None:
                raise RuntimeError("engine exited")
            if message.get("id") == rid and "method" not in message:
                break
            if (message.get("params") or {}).get("type") == "ContentPart":
                parts += 1
                if parts == 1:
                    first = time.perf_counter() - start
        wall = time.perf_counter() - start
        if parts != n:
            raise RuntimeError(f"{command}: {parts} ContentPart events, expected {n}")
        return first * 1e3, n / wall
    finally:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="LABEL=COMMAND (repeatable)")
    parser.add_argument("--sizes", default="1000,10000,50000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    engines = [tuple(c.split("=", 1)) for c in args.cmd]
    sizes = [int(s) for s in args.sizes.split(",")]
    first: dict[tuple[str, int], list[float]] = {}
    rate: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.repeat):
        for n in sizes:
            for label, command in engines:
                f, r = stream_once(command, n)
                first.setdefault((label, n), []).append(f)
                rate.setdefault((label, n), []).append(r)
                print(f"round {round_ + 1}: {label} N={n}: first {f:.1f} ms, {r:,.0f} ev/s", file=sys.stderr)
    print("| engine | N | prompt → first ContentPart, ms (median) | events/s over the turn (median) |")
    print("| --- | ---: | ---: | ---: |")
    for (label, n), values in first.items():
        rate_median = statistics.median(rate[(label, n)])
        print(f"| {label} | {n:,} | {statistics.median(values):.1f} | {rate_median:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
