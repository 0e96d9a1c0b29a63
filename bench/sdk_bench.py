#!/usr/bin/env python3
"""SDK overhead: the `stream` scenario of wire_bench.py, driven by its raw stdlib client,
through `soulwire.sdk` (Session → prompt → `async for` over typed events), and through
`query()`'s message layer (`run_turn`: merged typed messages, limits checked, ResultMessage)
over a started Session, against the same engine and scripted config, interleaved run by run.

    .venv/bin/python bench/sdk_bench.py --bench-dir /work/shared/bench --cmd .venv/bin/soulwire \
        --stream-sizes 1000,10000,50000 --repeat 5 --markdown sdk-overhead.md

Also reports the SDK's client-side cost per event without any engine (pre-encoded lines fed
to the connection, consumed by iterating a Turn): the ceiling the SDK itself imposes."""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def load_wire_bench(bench_dir: Path) -> Any:
    sys.path.insert(0, str(bench_dir))
    import wire_bench  # pyright: ignore[reportMissingImports]

    return wire_bench


def raw_run(wb: Any, flavor: Any, root: Path, n: int, timeout: float) -> dict[str, float]:
    """Exactly wire_bench's stream measurement (its Session and WireClient)."""
    first: list[float] = []
    last: list[float] = []
    count = [0]

    def on_msg(t: float, msg: dict[str, Any]) -> None:
        if msg.get("method") == "event" and (msg.get("params") or {}).get("type") == "ContentPart":
            count[0] += 1
            if not first:
                first.append(t)
            last[:] = [t]

    with wb.Session(flavor, wb.script_stream(n), True, root) as s:
        s.initialize(timeout)
        t_send, t_done, _ = s.prompt("stream please", timeout, on_msg=on_msg)
    return summarise(n, count[0], t_send, t_done, first, last)


async def sdk_turn(wb: Any, flavor: Any, root: Path, n: int) -> dict[str, float]:
    from soulwire.sdk import Session
    from soulwire.wire.types import TextPart

    run_dir = Path(tempfile.mkdtemp(prefix="sdk-run-", dir=root))
    spec = flavor.prepare(run_dir, wb.script_stream(n), yolo=True)
    args = [a for a in spec.argv[1:] if a != "--wire"]
    first: list[float] = []
    last: list[float] = []
    count = 0
    perf = time.perf_counter
    async with Session(executable=spec.argv[0], args=args, env=spec.env, inherit_env=False) as session:
        t_send = perf()
        turn = session.prompt("stream please")
        async for event in turn:
            if type(event) is TextPart:
                count += 1
                t = perf()
                if not first:
                    first.append(t)
                last[:] = [t]
        t_done = perf()
        assert turn.result.status == "finished"
    shutil.rmtree(run_dir, ignore_errors=True)
    return summarise(n, count, t_send, t_done, first, last)


async def query_turn(wb: Any, flavor: Any, root: Path, n: int) -> dict[str, float]:
    """The turn as `query()` runs it (after the engine is up): prompt → ResultMessage."""
    from soulwire.sdk import AssistantText, Options, ResultMessage, Session
    from soulwire.sdk.query import run_turn

    run_dir = Path(tempfile.mkdtemp(prefix="sdk-run-", dir=root))
    spec = flavor.prepare(run_dir, wb.script_stream(n), yolo=True)
    args = [a for a in spec.argv[1:] if a != "--wire"]
    options = Options(executable=spec.argv[0], args=args, env=spec.env, inherit_env=False, turn_timeout=600)
    perf = time.perf_counter
    chars = 0
    async with Session(options) as session:
        t_send = perf()
        async for message in run_turn(session, "stream please", options):
            if type(message) is AssistantText:
                chars += len(message.text)
            elif type(message) is ResultMessage:
                assert message.stop_reason == "finished", message
        t_done = perf()
    shutil.rmtree(run_dir, ignore_errors=True)
    expected = sum(len(f"tok{i}") for i in range(n))  # the DSL strips each line's trailing space
    if chars != expected:
        raise SystemExit(f"expected {expected} characters of text, got {chars}")
    wall = t_done - t_send
    return {"turn wall (ms)": wall * 1e3, "events/s over turn": n / wall}


def query_ceiling(n: int) -> float:
    """Microseconds per event spent by query()'s layer alone: folding N text chunks into
    messages (on top of `client_ceiling`), in batches as `run_turn` receives them."""
    from soulwire.sdk.messages import MessageFolder
    from soulwire.wire.messages import StatusUpdate
    from soulwire.wire.types import TextPart

    events: list[Any] = [TextPart(text=f"tok{i} ") for i in range(n)]
    events.append(StatusUpdate())
    folder = MessageFolder()
    seen: list[Any] = []
    t0 = time.perf_counter()
    out = 0
    for start in range(0, len(events), 2000):  # about one pipe read per batch
        out += len(folder.feed_many(events[start : start + 2000], seen.append))
    out += len(folder.flush())
    elapsed = time.perf_counter() - t0
    assert out == 2 and len(seen) == 2  # the first chunk opens the run; the status update
    return elapsed / n * 1e6


def summarise(
    n: int, got: int, t_send: float, t_done: float, first: list[float], last: list[float]
) -> dict[str, float]:
    if got != n:
        raise SystemExit(f"expected {n} ContentParts, got {got}")
    wall = t_done - t_send
    out = {"turn wall (ms)": wall * 1e3, "events/s over turn": n / wall}
    if first:
        out["prompt->first ContentPart (ms)"] = (first[0] - t_send) * 1e3
        window = last[0] - first[0]
        if window > 0 and n > 1:
            out["events/s in receive window"] = (n - 1) / window
    return out


def client_ceiling(n: int, *, record_chunks: bool = True) -> float:
    """Microseconds per event spent by the SDK alone: decode + route + record + iterate
    (`record_chunks=False`: as `query()` runs a Turn: text chunks as plain strings)."""
    from soulwire.sdk.engine import Engine
    from soulwire.sdk.turn import Turn
    from soulwire.wire.peer import Peer
    from soulwire.wire.streams import memory_pair

    lines = [
        (
            '{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":'
            f'{{"type":"text","text":"tok{i} "}}}}}}'
        ).encode()
        for i in range(n)
    ]
    begin = [
        b'{"jsonrpc":"2.0","method":"event","params":{"type":"TurnBegin","payload":{"user_input":"x"}}}',
        b'{"jsonrpc":"2.0","method":"event","params":{"type":"StepBegin","payload":{"n":1}}}',
    ]

    class Owner:
        def _cancel_stream(self, stream: Any, *, wait_answer: bool) -> None:
            return None

        async def steer(self, user_input: Any) -> None:
            return None

    async def run() -> float:
        conn = Engine.__new__(Engine)  # no process: lines are fed to its peer by hand
        conn.on_request = None
        turn = Turn(Owner(), "x")  # pyright: ignore[reportArgumentType]
        turn.record_chunks = record_chunks
        conn.on_part = turn._on_event
        conn.on_text = None if record_chunks else turn._on_text  # as Session.prompt(text_as_str=True)
        conn.on_event = turn._on_event
        peer = Peer(
            memory_pair()[0],
            notifications={"event": conn._on_event},
            fast_lane=conn._fast_lane,
            skip_blank_lines=True,
        )
        t0 = time.perf_counter()
        for line in begin:
            peer.handle(line)
        for start in range(0, n, 2000):  # about one pipe read per batch
            for line in lines[start : start + 2000]:
                peer.handle(line)
            async for _ in _take(turn, min(2000, n - start) + (2 if start == 0 else 0)):
                pass
        return (time.perf_counter() - t0) / n * 1e6

    return asyncio.run(run())


async def _take(turn: Any, k: int) -> Any:
    for _ in range(k):
        yield await turn.__anext__()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench-dir", default="/work/shared/bench", help="where wire_bench.py lives")
    p.add_argument("--cmd", default=str(Path(sys.executable).with_name("soulwire")), help="engine command")
    p.add_argument("--stream-sizes", default="1000,10000,50000")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--markdown", help="write the report here")
    p.add_argument("--json", help="write raw values here")
    args = p.parse_args()
    wb = load_wire_bench(Path(args.bench_dir))
    flavor = wb.load_flavor("kimi", args.cmd, None)
    root = Path(tempfile.mkdtemp(prefix="sdk-bench-"))
    sizes = [int(x) for x in args.stream_sizes.split(",") if x]
    values: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        # warm-up: page cache, .pyc files
        raw_run(wb, flavor, root, 100, args.timeout)
        asyncio.run(sdk_turn(wb, flavor, root, 100))
        asyncio.run(query_turn(wb, flavor, root, 100))
        clients = ("raw", "sdk", "query")
        for n in sizes:
            group = values.setdefault(f"N={n}", {c: {} for c in clients})
            for i in range(args.repeat):
                for client in clients[i % 3 :] + clients[: i % 3]:
                    if client == "raw":
                        out = raw_run(wb, flavor, root, n, args.timeout)
                    elif client == "sdk":
                        out = asyncio.run(sdk_turn(wb, flavor, root, n))
                    else:
                        out = asyncio.run(query_turn(wb, flavor, root, n))
                    for metric, value in out.items():
                        group[client].setdefault(metric, []).append(value)
                print(f"N={n} run {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
        ceiling = {n: min(client_ceiling(n) for _ in range(3)) for n in sizes}
        fold_cost = {n: min(query_ceiling(n) for _ in range(3)) for n in sizes}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = markdown(values, ceiling, fold_cost, args)
    print(report)
    if args.markdown:
        Path(args.markdown).write_text(report, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"values": values, "ceiling_us": ceiling, "query_fold_us": fold_cost}, indent=2)
        )
    return 0


def _change(base: float, other: float, metric: str) -> str:
    higher_is_better = "events/s" in metric
    change = (base / other - 1) if higher_is_better else (other / base - 1)
    return f"{change * 100:+.1f}% {'slower' if change > 0 else 'faster'}"


def markdown(
    values: dict[str, Any], ceiling: dict[int, float], fold_cost: dict[int, float], args: argparse.Namespace
) -> str:
    lines = [
        "| stream | metric | raw client | SDK Turn | query() | Turn vs raw | query() vs Turn |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for group, clients in values.items():
        for metric, raw_values in clients["raw"].items():
            raw = statistics.median(raw_values)
            sdk = statistics.median(clients["sdk"][metric])
            query_values = clients["query"].get(metric)
            if query_values:
                query = statistics.median(query_values)
                q_cell, q_change = f"{query:,.1f}", _change(sdk, query, metric)
            else:
                q_cell = q_change = "n/a"
            lines.append(
                f"| {group} | {metric} | {raw:,.1f} | {sdk:,.1f} | {q_cell} | {_change(raw, sdk, metric)} "
                f"| {q_change} |"
            )
    lines += [
        "",
        f"Medians of {args.repeat} interleaved runs per client and size; engine `{args.cmd}`; "
        f"Python {platform.python_version()} on {platform.platform()}.",
        "",
        "SDK client-side cost alone (no engine; decode, route, record, iterate), µs per event: "
        + ", ".join(f"N={n}: {us:.2f}" for n, us in ceiling.items()),
        "",
        "query()'s message fold alone (chunks merged into typed messages), µs per event: "
        + ", ".join(f"N={n}: {us:.2f}" for n, us in fold_cost.items()),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
