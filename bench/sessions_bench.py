#!/usr/bin/env python3
"""Session benchmarks: replay of a large recorded session and resume of a large context,
for soulwire and the reference (`kimi --wire`). Stdlib only.

    python3 bench/sessions_bench.py replay --engine soulwire --events 100000
    python3 bench/sessions_bench.py replay --engine kimi --cmd /work/ref/kimi-wrapper --events 100000
    python3 bench/sessions_bench.py resume --engine soulwire --context-mb 50

Both engines get the same synthesized session, copied into their share dir under
`sessions/<md5(work dir)>/<id>/` (the layout both read), then: spawn with `--session <id>`,
`initialize`, and `replay` (or a first `prompt`). Times are wall clock seen by the client;
peak memory is the engine's VmHWM read from /proc just before stdin is closed."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scripted_config import scripted_config

SESSION_ID = "bench-session"
WORDS = (
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
)  # fmt: skip


def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


# ---------------------------------------------------------------- synthesis


def turn_messages(rng: random.Random, i: int) -> list[dict]:
    """One recorded tool-using turn: 12 merged messages (sessions are written in whole turns)."""
    status = {
        "context_usage": 0.01,
        "context_tokens": 1000 + i,
        "max_context_tokens": 100000,
        "token_usage": {"input_other": 900, "output": 40, "input_cache_read": 100, "input_cache_creation": 0},
        "message_id": f"m{i}",
        "plan_mode": False,
        "mcp_status": None,
    }
    args = json.dumps({"command": f"echo {i}"})
    return [
        {"type": "TurnBegin", "payload": {"user_input": f"task {i}: " + text(rng, 12)}},
        {"type": "StepBegin", "payload": {"n": 1}},
        {"type": "ContentPart", "payload": {"type": "think", "think": text(rng, 30), "encrypted": None}},
        {"type": "ContentPart", "payload": {"type": "text", "text": text(rng, 25)}},
        {
            "type": "ToolCall",
            "payload": {
                "type": "function",
                "id": f"tc{i}",
                "function": {"name": "Shell", "arguments": args},
                "extras": None,
            },
        },
        {"type": "StatusUpdate", "payload": status},
        {
            "type": "ToolResult",
            "payload": {
                "tool_call_id": f"tc{i}",
                "return_value": {
                    "is_error": False,
                    "output": f"{i}\n" + text(rng, 40),
                    "message": "Command executed successfully.",
                    "display": [],
                    "extras": None,
                },
            },
        },
        {"type": "StepBegin", "payload": {"n": 2}},
        {"type": "ContentPart", "payload": {"type": "text", "text": text(rng, 20)}},
        {"type": "StatusUpdate", "payload": status},
        {"type": "ContentPart", "payload": {"type": "text", "text": "."}},
        {"type": "TurnEnd", "payload": {}},
    ]


def write_wire(path: Path, events: int, version: str) -> int:
    rng = random.Random(7)
    written = 0
    ts = 1795000000.0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "metadata", "protocol_version": version}) + "\n")
        i = 0
        while written < events:
            for message in turn_messages(rng, i):
                ts += 0.001
                out.write(json.dumps({"timestamp": ts, "message": message}, ensure_ascii=False) + "\n")
                written += 1
            i += 1
    return written


def write_media_context(path: Path, megabytes: float) -> tuple[int, int]:
    """A context.jsonl whose bulk is images (data URLs of ~1 MiB): few, large records."""
    rng = random.Random(13)
    target = int(megabytes * 1024 * 1024)
    size = messages = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"role": "_system_prompt", "content": "benchmark"}) + "\n")
        i = 0
        while size < target:
            blob = "".join(
                rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                for _ in range(1 << 20)
            )
            records = [
                {"role": "_checkpoint", "id": i},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"what is in image {i}?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64," + blob, "id": None},
                        },
                    ],
                },
                {"role": "assistant", "content": text(rng, 60)},
            ]
            for record in records:
                line = json.dumps(record) + "\n"
                out.write(line)
                size += len(line)
            messages += 2
            i += 1
    return size, messages


def write_context(path: Path, megabytes: float) -> tuple[int, int]:
    """A context.jsonl of tool-using turns; returns (bytes, messages)."""
    rng = random.Random(11)
    target = int(megabytes * 1024 * 1024)
    size = messages = 0
    checkpoint = 0
    with path.open("w", encoding="utf-8") as out:

        def put(record: dict) -> None:
            nonlocal size
            line = json.dumps(record, ensure_ascii=False) + "\n"
            out.write(line)
            size += len(line.encode())

        put({"role": "_system_prompt", "content": "You are a coding agent (benchmark session)."})
        i = 0
        while size < target:
            put({"role": "_checkpoint", "id": checkpoint})
            checkpoint += 1
            put({"role": "user", "content": f"question {i}: " + text(rng, 30)})
            messages += 1
            for step in range(3):
                put({"role": "_checkpoint", "id": checkpoint})
                checkpoint += 1
                put({"role": "_usage", "token_count": 1000})
                put(
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "think", "think": text(rng, 40), "encrypted": None},
                            {"type": "text", "text": text(rng, 20)},
                        ],
                        "tool_calls": [
                            {
                                "type": "function",
                                "id": f"tc{i}_{step}",
                                "function": {
                                    "name": "ReadFile",
                                    "arguments": json.dumps({"path": f"src/f{i}.py"}),
                                },
                            }
                        ],
                    }
                )
                put({"role": "_usage", "token_count": 1100})
                put(
                    {
                        "role": "tool",
                        "content": [
                            {"type": "text", "text": "<system>60 lines read.</system>"},
                            {
                                "type": "text",
                                "text": "\n".join(f"{n:6d}\t" + text(rng, 8) for n in range(60)),
                            },
                        ],
                        "tool_call_id": f"tc{i}_{step}",
                    }
                )
                messages += 2
            put({"role": "assistant", "content": text(rng, 50)})
            messages += 1
            i += 1
    return size, messages


# ---------------------------------------------------------------- engines


class Engine:
    def __init__(self, kind: str, cmd: str | None, root: Path, scripts: list[str]) -> None:
        self.kind, self.root = kind, root
        self.work = root / "work"
        self.home = root / "home"
        self.work.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        self.share = self.home / (".kimi" if kind == "kimi" else ".soulwire")
        (root / "scripts.json").write_text(json.dumps(scripts))
        config = scripted_config(root / "scripts.json", max_context_size=100_000_000, telemetry=False)
        (root / "config.json").write_text(json.dumps(config))
        base = cmd.split() if cmd else [sys.executable, "-m", "soulwire"]
        self.argv = [
            *base,
            "--wire",
            "--config-file",
            str(root / "config.json"),
            "--work-dir",
            str(self.work),
            "--session",
            SESSION_ID,
        ]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_"))}
        self.env.update(HOME=str(self.home), KIMI_DISABLE_TELEMETRY="1")
        self.env["KIMI_SHARE_DIR" if kind == "kimi" else "SOULWIRE_SHARE_DIR"] = str(self.share)

    def register_work_dir(self) -> None:
        """The reference only finds sessions of work dirs listed in kimi.json (else it
        creates the session anew, truncating its context.jsonl)."""
        self.share.mkdir(parents=True, exist_ok=True)
        entry = {"path": os.path.normpath(str(self.work)), "kaos": "local", "last_session_id": SESSION_ID}
        (self.share / "kimi.json").write_text(json.dumps({"work_dirs": [entry]}))

    @property
    def session_dir(self) -> Path:
        digest = hashlib.md5(os.path.normpath(str(self.work)).encode()).hexdigest()
        return self.share / "sessions" / digest / SESSION_ID


class Client:
    """Counts lines without decoding the event stream (the client must not be the bottleneck)."""

    def __init__(self, engine: Engine) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            engine.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=engine.env,
            cwd=engine.work,
        )
        self.responses: queue.Queue[tuple[float, dict]] = queue.Queue()
        self.lines = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if (
                raw.startswith(b'{"jsonrpc":"2.0","method"')
                or b'"method":"event"' in raw[:60]
                or b'"method": "event"' in raw[:60]
            ):
                self.lines += 1
                continue
            message = json.loads(raw)
            if "method" in message:
                self.lines += 1
                continue
            self.responses.put((time.perf_counter(), message))

    def request(self, rid: str, method: str, params: dict | None = None) -> tuple[float, dict]:
        body = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        assert self.proc.stdin is not None
        sent = time.perf_counter()
        self.proc.stdin.write((json.dumps(body) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            at, message = self.responses.get(timeout=600)
            if message.get("id") == rid:
                return at - sent, message

    def peak_rss_mib(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def bench_replay(args: argparse.Namespace) -> list[dict]:
    results = []
    for run in range(args.repeat):
        root = Path(tempfile.mkdtemp(prefix="swbench-"))
        try:
            engine = Engine(args.engine, args.cmd, root, ["text: x"])
            engine.session_dir.mkdir(parents=True)
            engine.register_work_dir()
            version = "1.10" if args.engine == "kimi" else "1.3"
            recorded = write_wire(engine.session_dir / "wire.jsonl", args.events, version)
            (engine.session_dir / "context.jsonl").write_text(
                json.dumps({"role": "_system_prompt", "content": "bench"}) + "\n"
            )
            size = (engine.session_dir / "wire.jsonl").stat().st_size
            client = Client(engine)
            _init_s, _ = client.request("i1", "initialize", {"protocol_version": "1.10"})
            replay_s, response = client.request("r1", "replay")
            rss = client.peak_rss_mib()
            client.close()
            result = response.get("result", {})
            results.append(
                {
                    "run": run + 1,
                    "load1": os.getloadavg()[0],
                    "recorded": recorded,
                    "wire_mib": size / 2**20,
                    "replay_s": replay_s,
                    "events": result.get("events"),
                    "requests": result.get("requests"),
                    "lines_received": client.lines,
                    "peak_rss_mib": rss,
                    "status": result.get("status"),
                }
            )
            print(json.dumps(results[-1]), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return results


def bench_resume(args: argparse.Namespace) -> list[dict]:
    results = []
    for run in range(args.repeat):
        root = Path(tempfile.mkdtemp(prefix="swbench-"))
        try:
            engine = Engine(args.engine, args.cmd, root, ["text: resumed fine"])
            engine.session_dir.mkdir(parents=True)
            engine.register_work_dir()
            writer = write_media_context if args.shape == "media" else write_context
            size, messages = writer(engine.session_dir / "context.jsonl", args.context_mb)
            write_wire(engine.session_dir / "wire.jsonl", 12, "1.10" if args.engine == "kimi" else "1.3")
            client = Client(engine)
            hello: dict = {"protocol_version": "1.10"}
            if args.external_tool:  # the reply then needs the engine: soulwire's lean path cannot answer it
                hello["external_tools"] = [
                    {"name": "ext_probe", "description": "d", "parameters": {"type": "object"}}
                ]
            _init_s, init = client.request("i1", "initialize", hello)
            init_total = time.perf_counter() - client.t0
            prompt_s, response = client.request("p1", "prompt", {"user_input": "go on"})
            prompt_total = time.perf_counter() - client.t0
            rss = client.peak_rss_mib()
            client.close()
            results.append(
                {
                    "run": run + 1,
                    "load1": os.getloadavg()[0],
                    "context_mib": size / 2**20,
                    "messages": messages,
                    "spawn_to_initialize_s": init_total,
                    "spawn_to_first_prompt_done_s": prompt_total,
                    "prompt_s": prompt_s,
                    "prompt_status": response.get("result", response.get("error")),
                    "resumed": (init.get("result") or {}).get("session", {}).get("resumed"),
                    "peak_rss_mib": rss,
                }
            )
            print(json.dumps(results[-1]), flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=["replay", "resume"])
    parser.add_argument("--engine", choices=["soulwire", "kimi"], default="soulwire")
    parser.add_argument("--cmd", help="engine command (default: this Python's `-m soulwire`)")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--context-mb", type=float, default=50)
    parser.add_argument(
        "--shape",
        choices=["turns", "media"],
        default="turns",
        help="resume: many small tool-using turns, or few records carrying 1 MiB images",
    )
    parser.add_argument("--external-tool", action="store_true", help="resume: register a tool in initialize")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results = bench_replay(args) if args.scenario == "replay" else bench_resume(args)
    keys = [k for k in results[0] if isinstance(results[0][k], float)]
    summary = {k: statistics.median(r[k] for r in results) for k in keys}
    print("median:", json.dumps(summary))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "results": results, "median": summary}, indent=2)
        )


if __name__ == "__main__":
    main()
