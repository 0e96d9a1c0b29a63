"""`soulwire serve`: memory per live idle session, attach latency, observer lag, and streaming
throughput over WebSocket against a lone `soulwire --wire` over stdio.

Everything runs on loopback with the scripted model; the client is Python (the `websockets`
sync client, one thread per socket), so the WebSocket rows include a Python client's cost.

    .venv/bin/python bench/serve_bench.py --sessions 200 --chunks 20000 --concurrent 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.server.serve_client import ServeProcess, WireSocket
from tests.wire_client import Sandbox, WireProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procfs import cpu_seconds as cpu_s


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def stream_script(n: int) -> str:
    return "\n".join(f"text: tok{i} " for i in range(n))


def attached(ws: WireSocket) -> dict[str, Any]:
    return ws.until(lambda m: m.get("method") == "attached")[-1]["params"]


def idle_memory(server: ServeProcess, count: int) -> dict[str, float]:
    """RSS growth per live session (runtime built, one turn run, no client attached)."""
    warm = server.create_session()
    ws = server.ws(warm)
    ws.initialize()
    ws.call("prompt", {"user_input": "warm"})
    ws.close()
    time.sleep(0.5)
    before = rss_mib(server.proc.pid)
    started = time.perf_counter()
    for _ in range(count):
        ws = server.ws(server.create_session())
        ws.initialize()
        ws.close()
    opened = time.perf_counter() - started
    time.sleep(1.0)
    after = rss_mib(server.proc.pid)
    live = sum(1 for s in server.api("GET", "/api/sessions").json() if s["live"])
    return {
        "sessions": count,
        "live": live,
        "rss_before_mib": before,
        "rss_after_mib": after,
        "per_session_mib": (after - before) / count,
        "open_ms_each": opened / count * 1e3,
    }


def attach_latency(server: ServeProcess, repeat: int) -> dict[str, float]:
    """Connect → `attached` on a live session; and connect → the last of a 500-event gap."""
    session = server.create_session()
    ws = server.ws(session, since_seq=0)
    epoch = attached(ws)["epoch"]
    ws.initialize(serve={"seq": True})
    ws.call("prompt", {"user_input": "fill"})  # 500 ContentParts in the ring
    ws.close()
    fresh: list[float] = []
    gap: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        ws = server.ws(session, mode="observer")
        attached(ws)
        fresh.append((time.perf_counter() - start) * 1e3)
        ws.close()
        start = time.perf_counter()
        ws = server.ws(session, since_seq=0, epoch=epoch, mode="observer")
        info = attached(ws)
        ws.until(lambda m, last=info["last_seq"]: (m.get("params") or {}).get("seq") == last)
        gap.append((time.perf_counter() - start) * 1e3)
        assert info["complete"] and info["sent"] >= 500
        ws.close()
    return {"fresh_ms_median": statistics.median(fresh), "backlog_ms_median": statistics.median(gap)}


def observer_lag(server: ServeProcess, chunks: int, batch: bool = False) -> dict[str, float]:
    """|time the observer got seq N minus time the controller got it|, over a streamed turn
    (at full speed: queueing in the two reader threads counts too)."""
    session = server.create_session()
    controller = server.ws(session, mode="controller")
    attached(controller)
    observer = server.ws(session, mode="observer")
    attached(observer)
    controller.initialize(serve={"seq": True, "batch": batch})
    if batch:
        observer.initialize(serve={"seq": True, "batch": True})
    controller.call("prompt", {"user_input": "warm"})
    observer.until(lambda m: (m.get("params") or {}).get("type") == "TurnEnd")
    stamps: dict[str, dict[int, float]] = {"c": {}, "o": {}}

    def collect(ws: WireSocket, key: str) -> None:
        while True:
            message = ws.recv(60)
            params = message.get("params") or {}
            if "seq" in params:
                stamps[key][params["seq"]] = time.perf_counter()
            if params.get("type") == "TurnEnd":
                return

    watcher = threading.Thread(target=collect, args=(observer, "o"))
    # The two readers are threads of one process: with CPython's default 5 ms switch
    # interval one can hold the GIL for 5 ms while the other's event waits, which would be
    # measured as server lag.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    watcher.start()
    controller.request("prompt", {"user_input": "stream"})
    try:
        collect(controller, "c")
        watcher.join(60)
    finally:
        sys.setswitchinterval(previous)
    signed = [(stamps["o"][s] - t) * 1e3 for s, t in stamps["c"].items() if s in stamps["o"]]
    lags = [abs(d) for d in signed]
    return {
        "events": len(lags),
        "lag_ms_median": statistics.median(lags),
        "lag_ms_p95": _p95(lags),
        # > 0: the observer is behind the controller; < 0: the controller is (its reader lags)
        "observer_minus_controller_ms_median": statistics.median(signed),
    }


def _p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95) - 1]


def ws_stream(server: ServeProcess, concurrent: int, chunks: int) -> dict[str, float]:
    """Aggregate ContentPart events/s with `concurrent` sessions streaming at once."""
    sockets: list[WireSocket] = []
    for _ in range(concurrent):
        ws = server.ws(server.create_session())
        ws.initialize()
        ws.call("prompt", {"user_input": "warm"})
        sockets.append(ws)
    counts = [0] * concurrent
    barrier = threading.Barrier(concurrent + 1)

    def run(index: int, ws: WireSocket) -> None:
        barrier.wait()
        rid = ws.request("prompt", {"user_input": "stream"})
        while True:
            message = ws.recv(120)
            if message.get("id") == rid and "method" not in message:
                return
            if (message.get("params") or {}).get("type") == "ContentPart":
                counts[index] += 1

    threads = [threading.Thread(target=run, args=(i, ws)) for i, ws in enumerate(sockets)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start, cpu = time.perf_counter(), cpu_s(server.proc.pid)
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    used = cpu_s(server.proc.pid) - cpu
    assert counts == [chunks] * concurrent, counts
    return {
        "sessions": concurrent,
        "events": sum(counts),
        "events_per_s": sum(counts) / wall,
        "server_cpu_us_per_event": used / sum(counts) * 1e6,
    }


def stdio_stream(sandbox: Sandbox, chunks: int) -> dict[str, float]:
    """The same turn through a lone `soulwire --wire` over its pipes."""
    sandbox.write()
    wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
    try:
        wire.initialize()
        wire.prompt("warm")
        start, cpu = time.perf_counter(), cpu_s(wire.proc.pid)
        messages, _ = wire.prompt("stream", timeout=120)
        wall = time.perf_counter() - start
        used = cpu_s(wire.proc.pid) - cpu
    finally:
        wire.close()
    parts = sum(1 for m in messages if (m.get("params") or {}).get("type") == "ContentPart")
    assert parts == chunks
    return {"events": parts, "events_per_s": parts / wall, "engine_cpu_us_per_event": used / parts * 1e6}


_STREAM_WORKER = """
import asyncio, json, os, re, sys, time, traceback
from websockets.asyncio.client import connect

OPEN_TIMEOUT_S = 300  # the server opens every session at once: the handshake waits for its runtime
PART = re.compile(sys.argv[1][1:])  # once per streamed part, however they are framed

def rpc(rid, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

async def one(url, batch, ready, go):
    try:
        async with connect(
            url, max_size=None, compression=None, ping_interval=None, open_timeout=OPEN_TIMEOUT_S
        ) as ws:
            init = {"protocol_version": "1.10", "client": {"name": "bench", "version": "1"}}
            if batch:
                init["serve"] = {"seq": True, "batch": True}
            await ws.send(rpc("i", "initialize", init))
            await ws.send(rpc("w", "prompt", {"user_input": "warm"}))
            while '"id":"w"' not in (await ws.recv()):
                pass
            ready.append(time.time())
            await go.wait()
            await ws.send(rpc("s", "prompt", {"user_input": "stream"}))
            parts = 0
            while True:
                frame = await ws.recv()
                parts += len(PART.findall(frame))
                if '"id":"s","result"' in frame:
                    return parts
    except BaseException:  # say which session failed and stop: the parent must not wait for it
        print(url.split("?")[0], file=sys.stderr)
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)

async def main():
    batch = sys.argv[1][0] == "1"
    urls = sys.argv[2:]
    ready, go = [], asyncio.Event()
    started = time.time()
    tasks = [asyncio.create_task(one(u, batch, ready, go)) for u in urls]
    while len(ready) < len(urls):
        await asyncio.sleep(0.01)
    print(json.dumps({"ready_s": max(ready) - started}), flush=True)
    sys.stdin.readline()
    go.set()
    counts = await asyncio.gather(*tasks)
    print(json.dumps({"parts": sum(counts), "end": time.time()}), flush=True)

asyncio.run(main())
"""


def ws_stream_processes(
    server: ServeProcess,
    concurrent: int,
    chunks: int,
    processes: int,
    batch: bool,
    part: str = '"type":"ContentPart"',
) -> dict[str, float]:
    """Aggregate ContentPart events/s with `concurrent` sessions streaming at once, read by
    `processes` client processes (asyncio, no JSON decoding of events: substring counts), so
    the client neither shares one GIL across all sockets nor spends more than the server.
    `part`: a pattern each streamed part adds once to what a client receives (a ContentPart
    each, or its text where the stream reaches clients folded: a shared store's record). A worker whose
    session fails exits with the error on its stderr (raised here)."""
    import subprocess

    urls = [
        f"ws://127.0.0.1:{server.port}/ws/sessions/{server.create_session()}?token={server.token}"
        for _ in range(concurrent)
    ]
    workers = []
    for index in range(processes):
        mine = urls[index::processes]
        if mine:
            argv = [sys.executable, "-c", _STREAM_WORKER, ("1" if batch else "0") + part, *mine]
            workers.append(
                subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )

    def report(worker: subprocess.Popen[str]) -> dict[str, Any]:
        assert worker.stdout is not None and worker.stderr is not None
        line = worker.stdout.readline()
        if not line:  # it exited: one of its sessions failed
            for other in workers:
                other.kill()
            raise RuntimeError(f"a stream worker failed:\n{worker.stderr.read()}")
        return json.loads(line)

    ready_s = max(report(worker)["ready_s"] for worker in workers)
    start, cpu = time.time(), cpu_s(server.proc.pid)
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    reports = [report(worker) for worker in workers]
    for worker in workers:
        worker.wait()
    wall = max(r["end"] for r in reports) - start
    used = cpu_s(server.proc.pid) - cpu
    events = sum(r["parts"] for r in reports)
    assert events == chunks * concurrent, (events, chunks * concurrent)
    return {
        "sessions": concurrent,
        "client_processes": len(workers),
        "batch": batch,
        "events": events,
        "events_per_s": events / wall,
        "server_cpu_us_per_event": used / events * 1e6,
        "ready_s": ready_s,
    }


def stdio_stream_raw(sandbox: Sandbox, chunks: int) -> dict[str, float]:
    """A lone `soulwire --wire` read the same cheap way (raw pipe, substring counts)."""
    import subprocess

    sandbox.write()
    proc = subprocess.Popen(
        sandbox.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=sandbox.env(), cwd=sandbox.work
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, fd = proc.stdin, proc.stdout.fileno()

    def call(rid: str, method: str, params: dict[str, Any]) -> int:
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n"
        stdin.write(line.encode())
        stdin.flush()
        parts, rest, marker = 0, b"", f'"id":"{rid}","result"'.encode()
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                raise RuntimeError("the engine exited")
            cut = data.rfind(b"\n") + 1  # count whole lines only: a read may split one
            lines, rest = rest + data[:cut], data[cut:] if cut else rest + data
            if not cut:
                continue
            parts += lines.count(b'"type":"ContentPart"')
            if marker in lines:
                return parts

    call("i", "initialize", {"protocol_version": "1.10", "client": {"name": "bench", "version": "1"}})
    call("w", "prompt", {"user_input": "warm"})
    start, cpu = time.time(), cpu_s(proc.pid)
    parts = call("s", "prompt", {"user_input": "stream"})
    wall = time.time() - start
    used = cpu_s(proc.pid) - cpu
    proc.stdin.close()
    proc.wait()
    assert parts == chunks, parts
    return {"events": parts, "events_per_s": parts / wall, "engine_cpu_us_per_event": used / parts * 1e6}


class Results(dict[str, Any]):
    """Each row is printed to stderr as it is measured, with the load average (a long run on
    a shared machine keeps what it measured even if a later row fails)."""

    def __setitem__(self, key: str, value: Any) -> None:
        value = {**value, "loadavg_1m": os.getloadavg()[0]}
        super().__setitem__(key, value)
        print(json.dumps({key: value}), file=sys.stderr, flush=True)


def stop(server: ServeProcess) -> None:
    """Stop a server; one slow to wind down its many sessions under load is killed."""
    import subprocess

    try:
        server.close()
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=200, help="idle sessions for the memory row")
    parser.add_argument("--chunks", type=int, default=20_000, help="ContentParts per streamed turn")
    parser.add_argument("--concurrent", type=int, default=10, help="sessions streaming at once")
    parser.add_argument("--repeat", type=int, default=30, help="attach latency samples")
    parser.add_argument(
        "--many", type=int, default=100, help="sessions streaming at once, read by client processes"
    )
    parser.add_argument("--client-processes", type=int, default=4, help="client processes for --many")
    parser.add_argument("--only-throughput", action="store_true", help="skip memory and attach rows")
    args = parser.parse_args()
    results = Results()

    root = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    stdio_box = Sandbox(root / "stdio", scripts=["text: warm", stream_script(args.chunks)])
    results["stdio_stream"] = stdio_stream(stdio_box, args.chunks)
    results["stdio_stream_raw"] = stdio_stream_raw(stdio_box, args.chunks)

    box = Sandbox(root / "serve", scripts=["text: warm", stream_script(args.chunks)])
    server = ServeProcess(box, "--idle-timeout", "3600")
    try:
        results["ws_stream_1"] = ws_stream(server, 1, args.chunks)
        results[f"ws_stream_{args.concurrent}"] = ws_stream(server, args.concurrent, args.chunks)
        for batch in (False, True):
            key = f"ws_stream_{args.many}_processes" + ("_batch" if batch else "")
            results[key] = ws_stream_processes(server, args.many, args.chunks, args.client_processes, batch)
        results["observer_lag"] = observer_lag(server, args.chunks)
        results["observer_lag_batch"] = observer_lag(server, args.chunks, batch=True)
    finally:
        stop(server)
    results["stdio_stream_raw_after"] = stdio_stream_raw(stdio_box, args.chunks)  # brackets the load
    rates = [results[k]["events_per_s"] for k in ("stdio_stream_raw", "stdio_stream_raw_after")]
    lone = sum(rates) / len(rates)
    for key in [k for k in results if k.startswith("ws_stream_")]:
        results[key] = {**results[key], "vs_lone_wire": results[key]["events_per_s"] / lone}
    if args.only_throughput:
        print(json.dumps(results, indent=2))
        return

    box = Sandbox(root / "attach", scripts=[stream_script(500)])
    server = ServeProcess(box, "--idle-timeout", "3600")
    try:
        results["attach"] = attach_latency(server, args.repeat)
    finally:
        stop(server)

    box = Sandbox(root / "memory", scripts=["text: warm"])
    server = ServeProcess(box, "--idle-timeout", "3600")
    try:
        results["idle_memory"] = idle_memory(server, args.sessions)
    finally:
        stop(server)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
