"""Observer lag across replicas (issue 35): how much later an observer attached to replica B
gets a message of a session that replica A runs than A's own client does.

Starts a throwaway PostgreSQL cluster (tests/postgres_cluster.py) and two `soulwire serve
--store` replicas with the scripted model. A client on A drives turns (text, a tool call, the
tool's result); an observer on B watches the same session. Both clients run in this process and
time each message by its `seq` on one clock as it arrives: the lag of a message is B's arrival
minus A's. A's client gets a message when it is committed (the owner numbers its record), B's
observer when the commit's NOTIFY has reached B and B has read the row — the lag is what the
fan-out through the store adds.

    python3 bench/observer_lag_bench.py [--turns 30]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from tests.postgres_cluster import PASSWORD, make_cluster
from tests.server.serve_client import ServeProcess, WireSocket
from tests.tool_calls import call
from tests.wire_client import Sandbox


def watch(socket: WireSocket, times: dict[int, float], stop: threading.Event, ends: list[int]) -> None:
    """Time every numbered message as it arrives, until `stop` (each socket on its own thread,
    both clients alike); the seq of each TurnEnd goes to `ends`."""
    while not stop.is_set():
        try:
            message = socket.recv(timeout=0.2)
        except TimeoutError:
            continue
        params = message.get("params") or {}
        if isinstance(params, dict) and isinstance(params.get("seq"), int):
            times.setdefault(params["seq"], time.time())  # (the clock `recorded_at` is on)
            if params.get("type") == "TurnEnd":
                ends.append(params["seq"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    reply = "text: " + "Looking at it now. " * 20 + "\n" + call("tc-1", "Shell", {"command": "echo lag"})
    cluster = make_cluster()
    a = b = None
    try:
        url = cluster.create_database("observerlag").replace(f":{PASSWORD}@", "@")
        with tempfile.TemporaryDirectory() as tmp:
            sandbox = Sandbox(Path(tmp), scripts=[reply, "text: done"] * args.turns)
            env = {"PGPASSWORD": PASSWORD}
            a = ServeProcess(sandbox, "--store", url, "--yolo", env=env)
            b = ServeProcess(sandbox, "--store", url, "--yolo", env=env)
            session = a.create_session()
            driver = a.ws(session)
            driver.initialize(serve={"seq": True})
            observer = b.ws(session, mode="observer", since_seq=0)
            observer.until(lambda m: m.get("method") == "attached")
            on_a: dict[int, float] = {}
            on_b: dict[int, float] = {}
            ends: list[int] = []
            stop = threading.Event()
            watchers = [
                threading.Thread(target=watch, args=(driver, on_a, stop, ends)),
                threading.Thread(target=watch, args=(observer, on_b, stop, [])),
            ]
            for watcher in watchers:
                watcher.start()
            for turn in range(args.turns):
                driver.request("prompt", {"user_input": f"turn {turn}"})
                deadline = time.monotonic() + 60
                while len(ends) <= turn and time.monotonic() < deadline:
                    time.sleep(0.01)  # the turn's end, seen by A's watcher (a bench, not a test)
            deadline = time.monotonic() + 30
            while not set(on_a) <= set(on_b) and time.monotonic() < deadline:
                time.sleep(0.05)  # the observer's last messages
            stop.set()
            for watcher in watchers:
                watcher.join()
            with psycopg.connect(cluster.url("observerlag")) as conn:
                recorded = dict(
                    conn.execute("SELECT seq, recorded_at FROM sw_wire WHERE session_id = %s", (session,))
                )
            common = [seq for seq in on_a if seq in on_b and seq in recorded]

            def ms(values: list[float]) -> dict[str, float]:
                values = sorted(values)
                return {
                    "median": round(statistics.median(values), 2),
                    "p90": round(values[int(len(values) * 0.9)], 2),
                    "max": round(values[-1], 2),
                }

            print(
                json.dumps(
                    {
                        "messages": len(common),
                        "missing_on_b": len(on_a) - len(common),
                        "b_after_a_ms": ms([(on_b[s] - on_a[s]) * 1000 for s in common]),
                        "recorded_to_a_client_ms": ms([(on_a[s] - recorded[s]) * 1000 for s in common]),
                        "recorded_to_b_observer_ms": ms([(on_b[s] - recorded[s]) * 1000 for s in common]),
                        "loadavg_1m": os.getloadavg()[0],
                        "cpus": os.cpu_count(),
                    }
                )
            )
    finally:
        for server in (a, b):
            if server is not None:
                server.close()
        cluster.remove()


if __name__ == "__main__":
    main()
