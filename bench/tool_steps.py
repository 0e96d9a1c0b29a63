"""Per-step cost of tool loops on a warm engine, side by side, with the bare `bash -c` cost.

wire_bench.py's `tools`/`approve` scenarios time the first prompt right after `initialize`;
for an engine that answers `initialize` before it has finished loading (Soulwire's lean
start-up path) that turn also pays the rest of the start-up. This script sends one warm-up
prompt first, so the K-step turns measure steps only. Engines run interleaved, so they share
the machine's load.

    python3 bench/tool_steps.py --cmd soulwire=/path/to/soulwire --cmd kimi=/path/to/kimi \\
        --tool-steps 50 --approve-steps 20 --repeat 5

Stdlib only. Each engine gets a private HOME / share dir and the `_scripted_echo` provider."""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from scripted_config import scripted_config


def bare_bash_ms(runs: int = 200) -> float:
    """Median of 5 batches: one `bash -c 'echo step 1'` with captured output, in ms."""
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(runs // 5):
            subprocess.run(["bash", "-c", "echo step 1"], capture_output=True, check=True)
        batches.append((time.perf_counter() - start) / (runs // 5) * 1e3)
    return statistics.median(batches)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process itself (children not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scripts(k: int) -> list[str]:
    calls = []
    for i in range(k):
        arguments = json.dumps({"command": f"echo step {i}"})
        calls.append("tool_call: " + json.dumps({"id": f"call-{i}", "name": "Shell", "arguments": arguments}))
    return [*calls, "text: done"]


class Engine:
    """One engine process driven over its pipes."""

    def __init__(self, command: str, script_list: list[str], yolo: bool, extra: tuple[str, ...] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tool-steps-"))
        work, home = self.root / "work", self.root / "home"
        work.mkdir()
        home.mkdir()
        (self.root / "scripts.json").write_text(json.dumps(script_list))
        config = scripted_config(self.root / "scripts.json")
        (self.root / "config.json").write_text(json.dumps(config))
        # PYTHONDONTWRITEBYTECODE would make every start compile the engine from source (tens of
        # ms, more for a bigger tree): users' installs have bytecode, so benchmarks must too.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KIMI_", "SOULWIRE_")) and k != "PYTHONDONTWRITEBYTECODE"
        }
        env.update(HOME=str(home), KIMI_SHARE_DIR=str(home / ".kimi"), SOULWIRE_SHARE_DIR=str(home / ".sw"))
        env["KIMI_DISABLE_TELEMETRY"] = "1"
        argv = [command, "--wire", "--config-file", str(self.root / "config.json"), "--work-dir", str(work)]
        try:
            self.proc = subprocess.Popen(
                argv + (["--yolo"] if yolo else []) + list(extra),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None if os.environ.get("TOOL_STEPS_STDERR") else subprocess.DEVNULL,
                env=env,
                cwd=work,
            )
        except OSError:
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.count = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.inbox.put(json.loads(line))
        self.inbox.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> tuple[float, int]:
        """Send a request, approve every ApprovalRequest; (seconds until the answer, ToolResults)."""
        self.count += 1
        rid = f"{method}-{self.count}"
        start = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        tool_results = 0
        while True:
            message = self.inbox.get(timeout=120)
            if message is None:
                raise RuntimeError("engine exited")
            if message.get("id") == rid and "method" not in message:
                return time.perf_counter() - start, tool_results
            params_in = message.get("params") or {}
            if message.get("method") == "request" and params_in.get("type") == "ApprovalRequest":
                request_id = params_in["payload"]["id"]
                answer = {"request_id": request_id, "response": "approve"}
                self.send({"jsonrpc": "2.0", "id": request_id, "result": answer})
            elif params_in.get("type") == "ToolResult":
                tool_results += 1

    def close(self) -> None:
        """End the engine (its stdin closes), then remove its temporary world."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def steps_ms(command: str, k: int, yolo: bool, extra: tuple[str, ...] = ()) -> tuple[float, float]:
    """(wall ms per step, engine CPU ms per step) of a K-step turn on a warm engine; `extra`
    are more engine flags."""
    engine = Engine(command, ["text: warm", *scripts(k)], yolo, extra)
    try:
        engine.call("initialize", {"protocol_version": "1.3"})
        engine.call("prompt", {"user_input": "warm up"})
        cpu_before = cpu_seconds(engine.proc.pid)
        wall, results = engine.call("prompt", {"user_input": "run the loop"})
        cpu = cpu_seconds(engine.proc.pid) - cpu_before
        if results != k:
            raise RuntimeError(f"{command}: {results} tool results, expected {k}")
        return wall / k * 1e3, cpu / k * 1e3
    finally:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", action="append", required=True, help="LABEL=COMMAND (repeatable)")
    parser.add_argument("--tool-steps", type=int, default=50)
    parser.add_argument("--approve-steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    engines = [tuple(c.split("=", 1)) for c in args.cmd]
    samples: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    bash: list[float] = []
    for round_ in range(args.repeat):
        bash.append(bare_bash_ms())
        for label, command in engines:
            scenarios = (("yolo", args.tool_steps, True), ("approve", args.approve_steps, False))
            for scenario, k, yolo in scenarios:
                value, cpu_ms = steps_ms(command, k, yolo)
                samples.setdefault((label, scenario), []).append(value)
                cpu.setdefault((label, scenario), []).append(cpu_ms)
                print(
                    f"round {round_ + 1}: {label} {scenario} {value:.2f} ms/step, "
                    f"engine CPU {cpu_ms:.2f} ms/step",
                    file=sys.stderr,
                )
    base = statistics.median(bash)
    batches = ", ".join(f"{b:.2f}" for b in bash)
    print(f"bare `bash -c 'echo step 1'`: median {base:.2f} ms (batches {batches})\n")
    print(
        "| engine | scenario | ms per step (median) | min | max | overhead per step (median - bash) "
        "| engine CPU ms per step (median) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (label, scenario), values in samples.items():
        median = statistics.median(values)
        print(
            f"| {label} | {scenario} | {median:.2f} | {min(values):.2f} | {max(values):.2f} "
            f"| {median - base:.2f} | {statistics.median(cpu[(label, scenario)]):.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
