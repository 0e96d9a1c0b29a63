"""Spawn → first prompt of the interactive shell, in a real pseudo-terminal.

Measures, per run: the time until the input line is painted (the prompt glyph is on the
screen and keys are being read), and until the engine is loaded (the status line names the
model), plus the CPU time the process had used when the input line appeared (user + system,
10 ms resolution): unlike wall time, it hardly depends on how busy the machine is. The
terminal's cursor-position queries are answered as a terminal would.

    python bench/tui_start.py [--runs 10] [--cmd "kimi"]   # --cmd: another shell to time
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.wire_client import scripted_config  # noqa: E402

CPR_QUERY = b"\x1b[6n"


def cpu_ms(pid: int) -> float:
    """User + system CPU time the process has used so far (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def one_run(
    argv: list[str], env: dict[str, str], cwd: Path, prompt: bytes, ready: bytes
) -> tuple[float, float, float]:
    master, slave = pty.openpty()
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    seen = b""
    first = loaded = cpu = float("nan")
    deadline = start + 30
    try:
        while time.perf_counter() < deadline:
            readable, _, _ = select.select([master], [], [], 0.05)
            if not readable:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            seen += chunk
            if CPR_QUERY in chunk:
                os.write(master, b"\x1b[1;1R")
            now = time.perf_counter()
            if first != first and prompt in seen:
                first = now - start
                cpu = cpu_ms(proc.pid)
            if loaded != loaded and ready in seen:
                loaded = now - start
            if first == first and loaded == loaded:
                break
    finally:
        os.write(master, b"\x04")
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)
    return first * 1000, loaded * 1000, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cmd", help="time another command instead (e.g. kimi); prompt glyph via --prompt")
    parser.add_argument("--prompt", default="\u276f")  # the shell's prompt glyph
    parser.add_argument("--ready", default="scripted_echo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "work").mkdir()
        scripts = root / "scripts.json"
        scripts.write_text(json.dumps(["text: hi"]))
        config = root / "config.json"
        config.write_text(json.dumps(scripted_config(scripts)))
        env = {
            **os.environ,
            "HOME": str(root),
            "SOULWIRE_SHARE_DIR": str(root / "share"),
            "TERM": "xterm-256color",
        }
        if args.cmd:
            argv = [*args.cmd.split(), "--config-file", str(config), "--work-dir", str(root / "work")]
        else:
            exe = Path(sys.executable).with_name("soulwire")
            argv = [str(exe), "--config-file", str(config), "--work-dir", str(root / "work")]
        one_run(argv, env, root / "work", args.prompt.encode(), args.ready.encode())  # warm the caches
        firsts, loads, cpus = [], [], []
        for _ in range(args.runs):
            first, loaded, cpu = one_run(argv, env, root / "work", args.prompt.encode(), args.ready.encode())
            firsts.append(first)
            loads.append(loaded)
            cpus.append(cpu)
    print(f"command: {' '.join(argv[:1])}  runs: {args.runs}")
    rows = (("input line painted", firsts), ("engine loaded     ", loads), ("CPU used at paint ", cpus))
    for label, values in rows:
        median, low, high = statistics.median(values), min(values), max(values)
        print(f"spawn → {label}: median {median:.0f} ms  (min {low:.0f}, max {high:.0f})")


if __name__ == "__main__":
    main()
