"""The session stores side by side (issue 35): appends to the file store and to PostgreSQL.

Starts a throwaway PostgreSQL cluster (initdb + pg_ctl on a temporary directory, as the tests
do: `tests/postgres_cluster.py`), then, in one run and on the same disk:

- `wire appends`: `record_wire` of a streamed part (a ~300-byte ContentPart) N times in one
  session, then `sync`: throughput (the final sync included) and the p50/p99 latency of one
  call (what an engine pays per event; on PostgreSQL a streamed part is queued for the group
  commit);
- `committed appends`: `record_wire` of a message that is not a streamed part (a StepBegin):
  on PostgreSQL each returns once committed, with every part before it;
- `context appends`: `append_context` of one message, likewise, then `sync`;
- `parallel sessions`: K sessions appending at once from K threads (a replica serving many
  sessions), a committed message after every 10 streamed parts: aggregate events per second.

The file store appends to a JSONL file (written and flushed, not fsynced per event); the
cluster runs with PostgreSQL's defaults except `fsync=off` (as the tests' cluster does), so
both sides pay the same durability (none per event): what is compared is the cost of the
round trips, not of the disk.

    python3 bench/store_bench.py [--events 3000] [--sessions 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from postgres_cluster import make_cluster
from soulwire.sessions.postgres import PostgresBackend
from soulwire.sessions.store import FileSessionStore, SessionStore

EVENT: dict[str, Any] = {
    "type": "ContentPart",
    "payload": {"type": "text", "text": "The quick brown fox jumps over the lazy dog. " * 5},
}
MESSAGE: dict[str, Any] = {"role": "assistant", "content": "A reply of a typical length. " * 8}
STEP: dict[str, Any] = {"type": "StepBegin", "payload": {"n": 1}}


def latencies(n: int, append: Callable[[], None], settle: Callable[[], None]) -> tuple[float, list[float]]:
    """Events per second (until `settle` returned: all of them durable) and each append's
    latency in ms."""
    samples: list[float] = []
    started = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        append()
        samples.append((time.perf_counter() - t) * 1000)
    settle()
    return n / (time.perf_counter() - started), samples


def describe(rate: float, samples: list[float]) -> str:
    samples = sorted(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return f"{rate:,.0f}/s  p50 {statistics.median(samples):.3f} ms  p99 {p99:.3f} ms"


def parallel(k: int, n: int, open_store: Callable[[str], SessionStore]) -> str:
    stores = [open_store(f"par-{i}") for i in range(k)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(k + 1)

    def run(store: SessionStore) -> None:
        try:
            barrier.wait()
            for i in range(n):
                store.record_wire(STEP if i % 10 == 9 else EVENT)
            store.sync()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    for store in stores:
        store.close()
    return f"{k * n / elapsed:,.0f} events/s over {k} sessions"


def run_store(
    name: str, open_store: Callable[[str], SessionStore], args: argparse.Namespace
) -> dict[str, str]:
    store = open_store(f"{name}-one")
    out = {
        "wire appends": describe(*latencies(args.events, lambda: store.record_wire(EVENT), store.sync)),
        "committed appends": describe(*latencies(args.events, lambda: store.record_wire(STEP), store.sync)),
        "context appends": describe(
            *latencies(args.events, lambda: store.append_context([MESSAGE]), store.sync)
        ),
    }
    store.close()
    out["parallel sessions"] = parallel(args.sessions, args.events // 2, open_store)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="store-bench-"))
    cluster = make_cluster()
    try:
        backend = PostgresBackend(cluster.url(), max_size=args.sessions + 2)
        backend.open_pool()
        backend.migrate()
        results = {
            "file": run_store(
                "file",
                lambda sid: FileSessionStore(tmp / "share", tmp / "work", sid, protocol_version="1.3"),
                args,
            ),
            "postgresql": run_store("pg", lambda sid: backend.open(sid, work_dir=str(tmp / "work")), args),
        }
        backend.close()
    finally:
        cluster.remove()
    print(f"events per measure: {args.events}; PostgreSQL with fsync off")
    for measure in results["file"]:
        print(f"{measure}")
        for store, values in results.items():
            print(f"  {store:11} {values[measure]}")


if __name__ == "__main__":
    main()
