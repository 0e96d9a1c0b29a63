"""Start-up, side by side: how soon a fresh engine answers, and how soon its first prompt
streams.

For each engine and run, a fresh process gets `initialize` at once, then a one-line scripted
prompt, in one of two ways:

- `after`: the prompt is sent when the `initialize` reply arrives (what wire_bench.py does);
- `pipelined`: the prompt is written right behind `initialize`, without waiting.

Reported (medians, ms from spawn unless said otherwise): the `initialize` reply, the first
ContentPart, the prompt's reply, and the first ContentPart counted from the moment the prompt
was sent. The `pipelined` first ContentPart is when the engine was really ready to work.

    python3 bench/startup.py --cmd soulwire=.venv/bin/soulwire --cmd kimi=/path/to/kimi --repeat 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tool_steps import Engine

HELLO = {"protocol_version": "1.9", "client": {"name": "startup-bench", "version": "1"}}


def run_once(command: str, pipelined: bool) -> dict[str, float]:
    spawn = time.perf_counter()
    engine = Engine(command, ["text: Hello from the start-up bench"], yolo=True)
    try:
        engine.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": HELLO})
        prompt = {"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}
        sent = 0.0
        if pipelined:
            engine.send(prompt)
            sent = time.perf_counter()
        marks: dict[str, float] = {}
        while "prompt" not in marks:
            message: dict[str, Any] | None = engine.inbox.get(timeout=60)
            now = time.perf_counter()
            if message is None:
                raise RuntimeError(f"{command} exited")
            if message.get("id") == "init":
                marks["initialize"] = now
                if not pipelined:
                    engine.send(prompt)
                    sent = time.perf_counter()
            elif message.get("id") == "p1" and "method" not in message:
                marks["prompt"] = now
            elif (message.get("params") or {}).get("type") == "ContentPart" and "content" not in marks:
                marks["content"] = now
    finally:
        engine.close()
    result = {f"spawn→{key} (ms)": (value - spawn) * 1000 for key, value in marks.items()}
    result["prompt sent→first ContentPart (ms)"] = (marks["content"] - sent) * 1000
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="label=command (repeatable)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="write all samples here")
    parser.add_argument(
        "--interleave", action="store_true", help="alternate the commands run by run (fair under load)"
    )
    args = parser.parse_args()
    samples: dict[str, dict[str, dict[str, list[float]]]] = {}
    commands = [spec.partition("=")[::2] for spec in args.cmd]
    for _, command in commands:
        run_once(command, pipelined=False)  # page cache and .pyc files warm
    rounds = [(m, [c]) for c in commands for m in ("after", "pipelined")]
    if args.interleave:
        rounds = [(m, commands) for m in ("after", "pipelined")]
    for mode, group in rounds:
        for _ in range(args.repeat):
            for label, command in group:
                rows = samples.setdefault(label, {}).setdefault(mode, {})
                for key, value in run_once(command, mode == "pipelined").items():
                    rows.setdefault(key, []).append(value)
    for label, modes in samples.items():
        for mode, rows in modes.items():
            print(f"## {label}, prompt {mode} the handshake")
            for key, values in rows.items():
                print(f"  {key:40s} median {statistics.median(values):8.1f}   min {min(values):8.1f}")
    if args.json:
        with Path(args.json).open("w") as out:
            json.dump(samples, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
