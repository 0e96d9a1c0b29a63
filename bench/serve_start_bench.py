"""`soulwire serve` start and stop, from outside, as a fleet and a browser see them.

* `ws` (default): spawn `soulwire serve --listen 127.0.0.1:0 --processes N` with a model of
  the OpenAI type (its SDK is preloaded before the fork, as a fleet's engines do), then on
  every port at once open `/ws/sessions/new?work_dir=…` and send `initialize`: the time from
  spawn to each answer. Then the sockets close, and after `--idle` seconds SIGTERM goes to the
  process group: the time until the first process has exited (it waits for its copies).
  `--stop-fresh` measures the stop of a server that never served a session instead.
* `web`: spawn a single-process `soulwire serve`, and a browser already running opens the
  login URL the moment the `listening on` line comes: the time from spawn to the app shell
  drawn (`body[data-ready='1']`, the session list fetched from the HTTP API).

Which code runs is the environment's: `PYTHONPATH=/path/to/src` picks a source tree, and
`--variant` runs several side by side, interleaved (a run of each, then again):

    .venv/bin/python bench/serve_start_bench.py --runs 7
    .venv/bin/python bench/serve_start_bench.py --mode web --runs 7
    .venv/bin/python bench/serve_start_bench.py --variant before:PYTHONPATH=/tmp/base/src \
        --variant after:PYTHONPATH=src --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TOKEN = "bench-token-0123456789abcdef"
CONFIG = {
    "default_model": "remote",
    "telemetry": False,
    "models": {"remote": {"provider": "fake", "model": "m", "max_context_size": 100_000}},
    # Never called: `initialize` needs no model request. The port is the discard service's.
    "providers": {"fake": {"type": "openai_legacy", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}},
}
HELLO = {"protocol_version": "1.9", "client": {"name": "serve-start-bench", "version": "1"}}


def spawn(
    root: Path, variant: dict[str, str], *args: str
) -> tuple[subprocess.Popen[bytes], float, list[str], threading.Event, int]:
    """The server, when it was spawned, its stderr lines (filled by a thread), and an event set
    once `expect` `listening on` lines came."""
    (root / "work").mkdir(exist_ok=True)
    config = root / "config.json"
    config.write_text(json.dumps(CONFIG))
    env = {**os.environ, "HOME": str(root), "SOULWIRE_SHARE_DIR": str(root / "share")}
    env["SOULWIRE_SERVER_TOKEN"] = TOKEN
    env.update(variant)
    argv = [sys.executable, "-m", "soulwire", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--config-file", str(config), "--work-dir", str(root / "work"), "--yolo", *args]
    expect = int(args[args.index("--processes") + 1]) if "--processes" in args else 1
    started = time.perf_counter()
    proc = subprocess.Popen(  # its own process group, as a fleet starts it
        argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace"))
            if sum("listening on" in x for x in lines) >= expect:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    return proc, started, lines, ready, expect


def ports(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for x in lines if (m := re.search(r"listening on http://[^:]+:(\d+)", x))]


def first_session(
    port: int, work: Path, started: float, out: dict[int, float], done: threading.Event
) -> None:
    """A session created on its WebSocket at `port`, `initialize` answered; held until `done`."""
    from websockets.sync.client import connect

    url = f"ws://127.0.0.1:{port}/ws/sessions/new?work_dir={work}&token={TOKEN}"
    with connect(url, open_timeout=60) as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": HELLO}))
        while port not in out:
            for line in str(ws.recv(timeout=60)).splitlines():
                if json.loads(line).get("id") == "init":
                    out[port] = time.perf_counter() - started
        done.wait(90)


def stop(proc: subprocess.Popen[bytes]) -> float:
    at = time.perf_counter()
    os.killpg(proc.pid, signal.SIGTERM)
    code = proc.wait(timeout=30)
    took = time.perf_counter() - at
    assert code == 0, code
    return took


def run_ws(variant: dict[str, str], processes: int, idle: float, fresh: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        proc, started, lines, ready, _ = spawn(
            root, variant, "--processes", str(processes), "--idle-timeout", "1"
        )
        try:
            assert ready.wait(60), "".join(lines)
            listening = time.perf_counter() - started
            result = {"listening (ms)": listening * 1000}
            if not fresh:
                answers: dict[int, float] = {}
                done = threading.Event()
                threads = [
                    threading.Thread(target=first_session, args=(p, root / "work", started, answers, done))
                    for p in ports(lines)
                ]
                for t in threads:
                    t.start()
                deadline = time.monotonic() + 90
                while len(answers) < processes and time.monotonic() < deadline:
                    time.sleep(0.005)
                done.set()
                for t in threads:
                    t.join(30)
                assert len(answers) == processes, lines
                result["initialize, first (ms)"] = min(answers.values()) * 1000
                result["initialize, all (ms)"] = max(answers.values()) * 1000
            else:
                time.sleep(2.5)  # started up and idle (a single process loads the price table 2 s in)
            time.sleep(idle)
            result["stop (ms)"] = stop(proc) * 1000
            return result
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run_web(variant: dict[str, str], browser: Any) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        page = browser.new_context().new_page()
        proc, started, lines, ready, _ = spawn(root, variant)
        try:
            assert ready.wait(60), "".join(lines)
            (port,) = ports(lines)
            page.goto(f"http://127.0.0.1:{port}/web/login?token={TOKEN}", timeout=60_000)
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            shown = time.perf_counter() - started
            return {"app shell drawn (ms)": shown * 1000, "stop (ms)": stop(proc) * 1000}
        finally:
            page.context.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=("ws", "web"), default="ws")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--idle", type=float, default=0.5, help="seconds between the sessions and SIGTERM")
    parser.add_argument("--stop-fresh", action="store_true", help="stop a server that served no session")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument(
        "--variant", action="append", default=[], metavar="LABEL:NAME=VALUE[,NAME=VALUE…]",
        help="environment of one of several servers compared, run by run; repeatable",
    )  # fmt: skip
    args = parser.parse_args()
    variants: dict[str, dict[str, str]] = {}
    for spec in args.variant or [":"]:
        label, _, assignments = spec.partition(":")
        pairs = [a.partition("=") for a in assignments.split(",") if a]
        variants[label] = {name: value for name, _, value in pairs}
        for path in variants[label].get("PYTHONPATH", "").split(os.pathsep):
            if path and not Path(path).is_dir():  # else the installed soulwire runs, silently
                parser.error(f"--variant {label}: no directory {path}")
    runs: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
    if args.mode == "web":
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            run_web(next(iter(variants.values())), browser)  # a warm-up: the browser's own first page
            for _ in range(args.runs):
                for label, variant in variants.items():
                    runs[label].append(run_web(variant, browser))
            browser.close()
    else:
        for _ in range(args.runs):
            for label, variant in variants.items():
                runs[label].append(run_ws(variant, args.processes, args.idle, args.stop_fresh))
    for label, done in runs.items():
        if label:
            print(f"{label}:")
        for key in done[0]:
            values = [r[key] for r in done]
            shown = " ".join(f"{v:.0f}" for v in values)
            print(
                f"  {key:26} median {statistics.median(values):6.0f}   min {min(values):6.0f}   runs: {shown}"
            )


if __name__ == "__main__":
    main()
