"""Signals a person (or a supervisor) sends: Ctrl-C ends `--print` with 130 and no noise,
SIGTERM ends it and `--wire` quietly, and neither leaves a child process behind — the Shell
command the agent was running, and what it started, go with the engine."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from tests.e2e.test_faults_lifetime import assert_nothing_survives, processes_with, wait_for
from tests.tool_calls import call
from tests.wire_client import Sandbox

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the processes")


def long_command(sandbox: Sandbox, tag: str) -> tuple[str, Path]:
    marker = sandbox.root / f"marker-{tag}"
    command = f"sleep 30 & wait; echo {tag} > /dev/null; touch {marker}"
    return call(
        "c1", "Shell", {"command": f"SOULWIRE_TEST_TAG={tag} bash -c '{command}'", "timeout": 60}
    ), marker


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_print_mode_ends_on_a_signal_without_noise_or_orphans(sandbox: Sandbox, sig: int, code: int):
    tag = f"sig-{uuid.uuid4().hex[:8]}"
    script, marker = long_command(sandbox, tag)
    sandbox.scripts = [script, "text: done"]
    sandbox.write()
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulwire", "--print", "-p", "go", "--config-file", str(sandbox.config_path)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sandbox.env(),
        cwd=sandbox.work, start_new_session=True,
    )  # fmt: skip
    assert wait_for(lambda: processes_with(tag), limit=20), "the command never started"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    returncode, stderr = proc.returncode, err.decode()
    # Both end the turn as a cancel does (its command's process group is killed first).
    assert (returncode, stderr) == (code, "")
    assert_nothing_survives(tag, [marker])


def test_wire_mode_ends_on_sigterm_without_orphans(engine, sandbox: Sandbox):
    tag = f"sig-{uuid.uuid4().hex[:8]}"
    script, marker = long_command(sandbox, tag)
    wire = engine(script, "text: done", args=("--yolo",))
    wire.initialize()
    wire.request("prompt", {"user_input": "go"})
    assert wait_for(lambda: processes_with(tag), limit=20), "the command never started"
    wire.proc.send_signal(signal.SIGTERM)
    wire.proc.wait(timeout=30)
    assert_nothing_survives(tag, [marker])
    assert "Traceback" not in "".join(wire.stderr_lines)
