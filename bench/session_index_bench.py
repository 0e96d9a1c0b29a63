#!/usr/bin/env python3
"""What a session costs `soulwire serve` as the work-dir index grows: `<share>/kimi.json`
lists every work dir ever used, and a fleet adds one per task (200 a run).

Starts one `soulwire serve` (the offline `_echo` model) on a share dir whose index already
holds `--prefill` work dirs, creates and closes `--sessions` sessions over the SDK, each in a
new work dir (as fleet tasks are), after 20 to warm up, and prints the server's CPU and the
wall time per session.

    .venv/bin/python bench/session_index_bench.py --prefill 0,5000,20000 --sessions 100
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio

from soulwire.sdk.remote import RemoteSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procfs import cpu_seconds

TOKEN = "bench-token-0123456789"


def run(prefill: int, sessions: int, prompt: bool) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="session-index-bench-"))
    try:
        share = root / "share"
        share.mkdir()
        entries = [
            {"path": f"/home/user/fleets/run{i // 200}/t{i:05d}/workspace", "kaos": "local",
             "last_session_id": str(uuid.uuid4())}
            for i in range(prefill)
        ]  # fmt: skip
        (share / "kimi.json").write_text(json.dumps({"work_dirs": entries}))
        config = root / "config.json"
        model = {"provider": "p", "model": "echo", "max_context_size": 100000}
        provider = {"type": "_echo", "base_url": "", "api_key": ""}
        config.write_text(
            json.dumps({"default_model": "m", "models": {"m": model}, "providers": {"p": provider}})
        )
        env = {
            **os.environ,
            "SOULWIRE_SHARE_DIR": str(share),
            "HOME": str(root),
            "SOULWIRE_SERVER_TOKEN": TOKEN,
        }
        argv = [
            sys.executable,
            "-m",
            "soulwire",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config-file",
            str(config),
        ]
        server = subprocess.Popen(
            [*argv, "--yolo", "--work-dir", str(root)], env=env, stderr=subprocess.PIPE, text=True
        )
        assert server.stderr is not None
        url = ""
        for line in server.stderr:
            if "listening on " in line:
                url = line.split("listening on ")[1].split()[0].replace("http://", "ws://")
                break
        work_dirs = [root / f"w{i}" for i in range(sessions + 20)]
        for work_dir in work_dirs:
            work_dir.mkdir()

        async def one(work_dir: Path) -> None:
            async with RemoteSession.create(url, TOKEN, work_dir=str(work_dir)) as session:
                if prompt:
                    async for _ in session.prompt("text: hi"):
                        pass

        async def main() -> dict[str, float]:
            for work_dir in work_dirs[:20]:
                await one(work_dir)
            cpu, wall = cpu_seconds(server.pid), time.perf_counter()
            for work_dir in work_dirs[20:]:
                await one(work_dir)
            cpu, wall = cpu_seconds(server.pid) - cpu, time.perf_counter() - wall
            return {
                "serve_cpu_ms": round(1000 * cpu / sessions, 2),
                "wall_ms": round(1000 * wall / sessions, 2),
            }

        try:
            return anyio.run(main)
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prefill", default="0,5000,20000", help="work dirs already in the index (list)")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--prompt", action="store_true", help="one prompt per session")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.runs):
        for prefill in (int(n) for n in args.prefill.split(",")):
            record = {
                "prefill": prefill,
                "sessions": args.sessions,
                **run(prefill, args.sessions, args.prompt),
            }
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
