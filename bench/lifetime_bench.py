"""What tying tool processes to the engine's life costs (tools/lifetime.py), per Shell call.

Runs `bash -c true` through the Shell tool's spawn path (`run_captured`) N times in a process
that holds ~100 MB (like a warm engine, so fork costs are realistic), with the watchdog tie
on and off, and the two alternatives that were measured and not chosen: the parent-death
signal through `preexec_fn` (Python forks instead of vforking) and through `setpriv`.

    .venv/bin/python bench/lifetime_bench.py --runs 200 --rounds 3
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import anyio

from soulwire.tools import lifetime
from soulwire.tools.builtin import process
from soulwire.tools.builtin.process import Capture, run_captured

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _pdeathsig() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, 9)


async def _shell_calls(runs: int, argv: list[str]) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        await run_captured(argv, cwd=Path("/"), timeout=10, out=Capture(head=1000))
    return (time.perf_counter() - started) * 1000 / runs


async def _paired_calls(runs: int, argv: list[str]) -> tuple[float, float]:
    """Median ms of a call with the tie and without, alternating call by call (fair under load)."""
    tied: list[float] = []
    untied: list[float] = []
    pairs = [(lifetime.ready_to_tie, lifetime.tie_to_engine, tied), (_no_ready, _no_tie, untied)]
    for index in range(runs):
        for ready, tie, samples in pairs if index % 2 else pairs[::-1]:
            process.ready_to_tie, process.tie_to_engine = ready, tie
            started = time.perf_counter()
            await run_captured(argv, cwd=Path("/"), timeout=10, out=Capture(head=1000))
            samples.append((time.perf_counter() - started) * 1000)
    process.ready_to_tie, process.tie_to_engine = lifetime.ready_to_tie, lifetime.tie_to_engine
    return statistics.median(tied), statistics.median(untied)


def _no_ready(env: object = None) -> object:
    return env


def _no_tie(pgid: int, env: object = None) -> None:
    pass


def _popen_calls(runs: int, **options: object) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        child = subprocess.Popen(
            ["bash", "-c", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
            **options,  # type: ignore[arg-type]
        )  # fmt: skip
        assert child.stdout is not None
        child.stdout.read()
        child.wait()
    return (time.perf_counter() - started) * 1000 / runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    ballast = [bytearray(1024) for _ in range(100_000)]  # ~100 MB resident, like a warm engine
    bash = shutil.which("bash") or "bash"
    setpriv = shutil.which("setpriv")

    first = time.perf_counter()
    lifetime.tie_to_engine(1 << 30)  # starts the watchdog (an id no group has)
    first_ms = (time.perf_counter() - first) * 1000

    micro = time.perf_counter()
    for _ in range(10_000):
        lifetime.tie_to_engine(1 << 30)
    tie_us = (time.perf_counter() - micro) * 1e6 / 10_000

    results: dict[str, list[float]] = {"tied (watchdog)": [], "untied": [], "pdeathsig via preexec_fn": []}
    if setpriv:
        results["pdeathsig via setpriv"] = []
    for _ in range(args.rounds):
        tied, untied = anyio.run(_paired_calls, args.runs, [bash, "-c", "true"])
        results["tied (watchdog)"].append(tied)
        results["untied"].append(untied)
        results["pdeathsig via preexec_fn"].append(_popen_calls(args.runs, preexec_fn=_pdeathsig))
        if setpriv:
            argv = [setpriv, "--pdeathsig", "KILL", "--", bash, "-c", "true"]
            results["pdeathsig via setpriv"].append(anyio.run(_shell_calls, args.runs, argv))
    print(f"watchdog start (once per engine, at the first tool process): {first_ms:.2f} ms")
    print(f"tie_to_engine alone: {tie_us:.2f} µs per call")
    for name, values in results.items():
        rounds = ", ".join(f"{v:.3f}" for v in values)
        print(f"{name:28} median {statistics.median(values):6.3f} ms per call  ({rounds})")
    del ballast


if __name__ == "__main__":
    main()
