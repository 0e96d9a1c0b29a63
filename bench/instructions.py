"""CPU instructions an engine executes for fixed Wire sessions, counted by valgrind's
callgrind: a number that does not move with the machine's load, for before/after comparisons
on a shared machine where wall-clock timings swing by tens of percent.

Scenarios (each a whole process, from exec to exit, all threads, children not traced):

- `handshake`: `initialize`, then EOF once it is answered;
- `stream-N`: `initialize`, one prompt answered by an N-chunk scripted reply, then EOF;
- `tools-K`: `initialize`, one prompt running K Shell steps (`--yolo`), then EOF.

The session is the same for every engine; the count includes start-up and shutdown, so the
difference between two scenarios is the cost of what the longer one adds.

    python3 bench/instructions.py --cmd before=/path/to/old/soulwire --cmd after=.venv/bin/soulwire
    python3 bench/instructions.py --cmd "old=PYTHONPATH=/old/src .venv/bin/python -m soulwire" ...

Needs valgrind (Debian package `valgrind`). Stdlib only."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from scripted_config import scripted_config

HELLO = {"protocol_version": "1.9", "client": {"name": "instructions-bench", "version": "1"}}
COLLECTED = re.compile(rb"Collected : (\d+)")


def scenario(name: str) -> tuple[list[str], list[dict[str, object]]]:
    """(the scripted model's replies, the requests to send)."""
    init = {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": HELLO}
    prompt = {"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "go"}}
    if name == "handshake":
        return [], [init]
    kind, _, count = name.partition("-")
    n = int(count)
    if kind == "stream":
        return ["\n".join(f"text: tok{i} " for i in range(n))], [init, prompt]
    if kind == "tools":
        call = 'tool_call: {"id": "t%d", "name": "Shell", "arguments": "{\\"command\\": \\"true\\"}"}'
        return [call % i for i in range(n)] + ["text: done"], [init, prompt]
    raise SystemExit(f"unknown scenario {name}")


def count(command: str, name: str) -> int:
    scripts, requests = scenario(name)
    with tempfile.TemporaryDirectory(prefix="instr-") as root_text:
        root = Path(root_text)
        work, home = root / "work", root / "home"
        work.mkdir()
        home.mkdir()
        (root / "scripts.json").write_text(json.dumps(scripts))
        config = scripted_config(root / "scripts.json")
        (root / "config.json").write_text(json.dumps(config))
        # Without bytecode every start compiles the engine from source, and that would be
        # counted (users' installs have bytecode): drop PYTHONDONTWRITEBYTECODE, and `main`
        # runs each engine once before counting so the bytecode exists.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KIMI_", "SOULWIRE_")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(HOME=str(home), SOULWIRE_SHARE_DIR=str(home / ".sw"), KIMI_SHARE_DIR=str(home / ".kimi"))
        words = shlex.split(command)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # VAR=value prefixes
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        argv = [*words, "--wire", "--config-file", str(root / "config.json"), "--work-dir", str(work)]
        argv.append("--yolo")
        # Requests go in at once; stdin stays open until the last one is answered (stdin EOF
        # cancels a running turn, spec §2.6), then closes: the engine exits by itself.
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=work,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        proc.stdin.flush()
        last = str(requests[-1]["id"])
        answered = False
        for line in proc.stdout:
            message = json.loads(line)
            if message.get("id") == last and "method" not in message:
                answered = "result" in message
                break
        proc.stdin.close()
        proc.stdout.read()
        stderr = proc.stderr.read()
        proc.wait(timeout=1800)
    if not answered:
        raise SystemExit(f"{command} {name}: the last request was not answered")
    found = COLLECTED.search(stderr)
    if found is None:
        raise SystemExit(f"{command} {name}: no count\n{stderr[-2000:].decode(errors='replace')}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="LABEL=COMMAND (repeatable)")
    parser.add_argument("--scenarios", default="handshake,stream-10000,tools-20")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args()
    engines = [tuple(c.split("=", 1)) for c in args.cmd]
    names = [s for s in args.scenarios.split(",") if s]
    counts: dict[str, dict[str, int]] = {}
    for _label, command in engines:  # writes the bytecode of anything not compiled yet
        count(command, "handshake")
    for name in names:
        for label, command in engines:
            counts.setdefault(label, {})[name] = count(command, name)
            print(f"{label} {name}: {counts[label][name]:,}", flush=True)
    labels = [label for label, _ in engines]
    print("\n| scenario | " + " | ".join(f"{label} (M instr.)" for label in labels) + " | change |")
    print("| --- |" + " ---: |" * (len(labels) + 1))
    for name in names:
        values = [counts[label][name] for label in labels]
        change = f"{(values[-1] / values[0] - 1) * 100:+.1f}%" if len(values) > 1 else ""
        print(f"| {name} | " + " | ".join(f"{v / 1e6:,.1f}" for v in values) + f" | {change} |")
    if args.json:
        Path(args.json).write_text(json.dumps(counts, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
