"""Cancel latency of a running Shell `sleep 30`, with the engine started by different parents.

A parent such as the Go SDK may start the engine with SIGTERM/SIGINT ignored or blocked, and
a process inherits both (ignored dispositions survive exec; the signal mask always does). A
tool command that inherits them shrugs off the SIGTERM of a cancel and lives until SIGKILL.
This measures `cancel` → prompt answer, and how the `sleep` ended (its shell traps SIGTERM
and writes a file), for three parents:

* `plain`: started directly (a raw Wire client);
* `ignoring`: the parent sets SIGTERM/SIGINT to SIG_IGN, then execs the engine;
* `blocking`: the parent blocks SIGTERM/SIGINT in its mask and ignores them, then execs.

    python3 bench/cancel_under_parent.py --runs 5 [--cmd "python -m soulwire"]

Stdlib only. Each run gets a private HOME, share dir and the `_scripted_echo` provider."""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
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

LAUNCHER = """
import os, signal, sys
mode = sys.argv[1]
if mode in ("ignoring", "blocking"):
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
if mode == "blocking":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
os.execvp(sys.argv[2], sys.argv[2:])
"""
"""Exec the engine the way a parent that ignores (and blocks) the signals would."""

PARENTS = ("plain", "ignoring", "blocking")


def launcher_argv(mode: str, engine: list[str]) -> list[str]:
    """The argv that starts `engine` under a parent of kind `mode`."""
    return [sys.executable, "-c", LAUNCHER, mode, *engine]


def shell_command(marker: Path) -> str:
    """A command that records how it ended: the SIGTERM trap writes `term` to `marker`."""
    return f"trap 'echo term > {marker}; exit 143' TERM; sleep 30 & wait"


class Run:
    def __init__(self, engine: list[str], mode: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="cancel-parent-"))
        work, home = self.root / "work", self.root / "home"
        work.mkdir()
        home.mkdir()
        self.marker = self.root / "how-it-ended"
        arguments = json.dumps({"command": shell_command(self.marker), "timeout": 60})
        scripts = [
            "tool_call: " + json.dumps({"id": "c1", "name": "Shell", "arguments": arguments}),
            "text: x",
        ]
        (self.root / "scripts.json").write_text(json.dumps(scripts))
        config = scripted_config(self.root / "scripts.json")
        (self.root / "config.json").write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_"))}
        env.update(HOME=str(home), SOULWIRE_SHARE_DIR=str(home / ".soulwire"))
        argv = [
            *engine,
            "--wire",
            "--yolo",
            "--config-file",
            str(self.root / "config.json"),
            "--work-dir",
            str(work),
        ]
        self.proc = subprocess.Popen(
            launcher_argv(mode, argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, cwd=work,
        )  # fmt: skip
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.inbox.put(json.loads(line))
        self.inbox.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def until(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
            if message is None:
                raise EOFError("engine ended")
            if predicate(message):
                return message

    def measure(self) -> tuple[float, str]:
        """(ms from `cancel` to the prompt's answer, how the command ended)."""
        self.send(
            {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocol_version": "1.9"}}
        )
        self.until(lambda m: m.get("id") == "i")
        self.send({"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "go"}})
        self.until(lambda m: (m.get("params") or {}).get("type") == "ToolCall")
        deadline = time.monotonic() + 10  # the command is running once its `sleep` is there
        while not _sleep_running(self.root) and time.monotonic() < deadline:
            time.sleep(0.005)
        started = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": "c", "method": "cancel"})
        self.until(lambda m: m.get("id") == "p")
        elapsed = (time.perf_counter() - started) * 1e3
        ended = self.marker.read_text().strip() if self.marker.exists() else "SIGKILL"
        return elapsed, ended

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def _sleep_running(root: Path) -> bool:
    """Whether the run's `sleep 30` has started (its shell's cwd is the run's work dir)."""
    work = str(root / "work")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            is_sleep = (entry / "cmdline").read_bytes().startswith(b"sleep\x0030")
            if is_sleep and str((entry / "cwd").readlink()) == work:
                return True
        except OSError:
            continue
    return False


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cmd", default=f"{sys.executable} -m soulwire", help="the engine command")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    engine = shlex.split(args.cmd)
    results: dict[str, list[tuple[float, str]]] = {mode: [] for mode in PARENTS}
    for _ in range(args.runs):
        for mode in PARENTS:  # interleaved: the modes share the machine's load
            run = Run(engine, mode)
            try:
                results[mode].append(run.measure())
            finally:
                run.close()
    for mode in PARENTS:
        times = [t for t, _ in results[mode]]
        endings = sorted({e for _, e in results[mode]})
        print(
            f"{mode:9} cancel → answer median {statistics.median(times):7.1f} ms "
            f"(min {min(times):.1f}, max {max(times):.1f}); command ended by: {', '.join(endings)}"
        )


if __name__ == "__main__":
    main()
