"""A parent that starts the engine with SIGTERM/SIGINT ignored and blocked (as the Go SDK, or a
supervisor, may) must not pass that on to the tools: a cancel's SIGTERM ends the command at
once, by its own trap, instead of the SIGKILL after the grace period."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from tests.e2e.test_faults_lifetime import processes_with, wait_for
from tests.tool_calls import call
from tests.wire_client import Sandbox, WireProcess

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the processes")

HOSTILE_PARENT = """
import os, signal, sys
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
os.execvp(sys.argv[1], sys.argv[1:])
"""
"""Ignores and blocks the signals, then execs the engine (which inherits both)."""

SIGTERM_BIT = 1 << (15 - 1)
SIGINT_BIT = 1 << (2 - 1)


def under_hostile_parent(sandbox: Sandbox, *scripts: str) -> WireProcess:
    sandbox.scripts = list(scripts)
    sandbox.write()
    argv = [sys.executable, "-c", HOSTILE_PARENT, *sandbox.argv("--yolo")]
    return WireProcess(argv, sandbox.env(), sandbox.work)


def trapped_sleep(marker: Path) -> tuple[str, str]:
    """A command whose `sleep` is found by its unique duration, and whose shell's trap writes
    `term` on SIGTERM: a shell that inherited SIGTERM ignored cannot trap it, one that had it
    blocked never sees it (the SIGKILL after the grace period ends it without a word)."""
    duration = f"30.{random.randrange(10**8):08d}"
    command = f"sleep {duration} & pid=$!; trap 'echo term > {marker}; exit 143' TERM; wait $pid"
    return command, duration


def the_sleep(duration: str) -> list[int]:
    """The live `sleep` of that duration (not the shell whose command line names it too)."""
    return [pid for pid in processes_with(duration) if _cmdline(pid).startswith(b"sleep\0")]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def signal_masks(pid: int) -> tuple[int, int]:
    """(blocked, ignored) signal bit sets of a live process."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    return int(fields["SigBlk"], 16), int(fields["SigIgn"], 16)


def test_cancel_ends_a_shell_command_by_sigterm_under_a_parent_that_ignores_it(sandbox: Sandbox):
    marker = sandbox.root / "how-it-ended"
    command, duration = trapped_sleep(marker)
    wire = under_hostile_parent(sandbox, call("c1", "Shell", {"command": command, "timeout": 60}), "text: x")
    try:
        wire.initialize()
        prompt = wire.request("prompt", {"user_input": "go"})
        assert wait_for(lambda: the_sleep(duration), limit=20), "the command never started"
        (sleeper,) = the_sleep(duration)
        blocked, ignored = signal_masks(sleeper)
        assert blocked & (SIGTERM_BIT | SIGINT_BIT) == 0, f"SigBlk {blocked:x}"
        assert ignored & SIGTERM_BIT == 0, f"SigIgn {ignored:x}"  # (bash ignores SIGINT in `&` jobs)

        wire.request("cancel")
        _, response = wire.until_response(prompt, timeout=30)
        assert response["result"]["status"] == "cancelled"
        assert wait_for(lambda: not the_sleep(duration), limit=30), "the sleep outlived the cancel"
        assert marker.read_text().split() == ["term"]  # SIGTERM ended it, not the later SIGKILL
    finally:
        wire.close()


def test_a_background_task_ends_by_sigterm_with_the_session_under_a_parent_that_ignores_it(sandbox: Sandbox):
    marker = sandbox.root / "how-it-ended"
    command, duration = trapped_sleep(marker)
    start = call("b", "Shell", {"command": command, "run_in_background": True, "description": "sleeper"})
    wire = under_hostile_parent(sandbox, start, "text: started")
    try:
        wire.initialize()
        _, response = wire.prompt("start it")
        assert response["result"]["status"] == "finished"
        assert wait_for(lambda: the_sleep(duration), limit=20), "the task never started"
        (sleeper,) = the_sleep(duration)
        assert signal_masks(sleeper)[0] & (SIGTERM_BIT | SIGINT_BIT) == 0
        assert wire.close(timeout=30) == 0  # the session's end stops the task: SIGTERM, SIGKILL after 2 s
        assert wait_for(lambda: not the_sleep(duration), limit=30), "the task outlived the session"
        assert marker.read_text().split() == ["term"]
    finally:
        wire.close()
