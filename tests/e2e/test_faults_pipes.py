"""Readers that go away and Ctrl-C: `soulwire demo | head -1`, `soulwire --print … | head`,
a Wire client that closes the engine's stdout, SIGINT in print mode and in the demo. Each
ends quietly — no traceback, exit 0 / 141 / 130 — and the session files keep what happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.e2e.test_shell_tool import processes_running
from tests.tool_calls import call
from tests.wire_client import Sandbox

from soulwire.sessions.paths import session_dir

LONG_TEXT = "\n".join(f"text: line {i} of a long answer; " for i in range(4000))


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wire_types(sandbox: Sandbox, session: str) -> list[str]:
    wire = session_dir(sandbox.share, sandbox.work, session) / "wire.jsonl"
    return [r["message"]["type"] for r in records(wire) if "message" in r]


def wait_for_turn_ends(sandbox: Sandbox, session: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if wire_types(sandbox, session).count("TurnEnd") >= count:
                return
        except (FileNotFoundError, ValueError):
            pass  # not written yet, or a line caught half-written
        time.sleep(0.05)
    raise AssertionError(f"the session did not record {count} turn ends in {timeout} s")


def user_messages(sandbox: Sandbox, session: str) -> list[Any]:
    context = session_dir(sandbox.share, sandbox.work, session) / "context.jsonl"
    return [r["content"] for r in records(context) if r.get("role") == "user"]


def spawn(sandbox: Sandbox, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    sandbox.write()
    return subprocess.Popen(
        [sys.executable, "-m", "soulwire", *args],
        stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sandbox.env(), cwd=sandbox.work,
        start_new_session=True,
    )  # fmt: skip


def print_mode(sandbox: Sandbox, session: str, *extra: str) -> list[str]:
    return ["--print", "-p", "hi", "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work),
            "--session", session, *extra]  # fmt: skip


def finish(proc: subprocess.Popen[bytes], timeout: float = 30) -> tuple[int, str]:
    assert proc.stderr is not None
    code = proc.wait(timeout=timeout)
    return code, proc.stderr.read().decode("utf-8", "replace")


def test_demo_into_head_exits_quietly(sandbox):
    proc = spawn(sandbox, "demo")
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"\xc2\xbb engine Soulwire")  # `» engine …`
    proc.stdout.close()  # what `head -1` does after its line
    code, stderr = finish(proc)
    assert code in (0, 141)
    assert stderr == ""


def test_print_mode_into_head_exits_quietly_and_keeps_the_session(sandbox):
    sandbox.scripts = [LONG_TEXT]
    proc = spawn(sandbox, *print_mode(sandbox, "piped"))
    assert proc.stdout is not None
    assert proc.stdout.read(20).startswith(b"line 0 of")
    proc.stdout.close()
    code, stderr = finish(proc)
    assert code == 141
    assert stderr == ""
    types = wire_types(sandbox, "piped")
    assert types[0] == "TurnBegin" and types[-1] == "TurnEnd" and types.count("TurnEnd") == 1
    prompt, note = user_messages(sandbox, "piped")  # the turn was cut short: the model is told
    assert prompt == "hi" and note.startswith("<system>Interrupted: the turn was cancelled")


def test_print_mode_output_complete_when_nobody_leaves(sandbox):
    """The control for the test above: the whole answer arrives and the exit code is 0."""
    sandbox.scripts = [LONG_TEXT]
    proc = spawn(sandbox, *print_mode(sandbox, "whole"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b""
    assert out.count(b"of a long answer") == 4000


def test_a_wire_client_that_closes_stdout_leaves_a_complete_session(sandbox):
    sandbox.scripts = [LONG_TEXT, "text: second"]
    argv = [
        "--wire",
        "--config-file",
        str(sandbox.config_path),
        "--work-dir",
        str(sandbox.work),
        "--session",
        "deaf",
    ]
    proc = spawn(sandbox, *argv, stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def send(method: str, params: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": method, "method": method, "params": params}).encode()
        )
        proc.stdin.write(b"\n")
        proc.stdin.flush()

    send("initialize", {"protocol_version": "1.3"})
    assert b'"result"' in proc.stdout.readline()
    proc.stdout.close()  # the client stops listening; the engine goes on working
    send("prompt", {"user_input": "first"})
    # Nothing can be read from the engine now: the session's records say when a turn is over
    # (a prompt sent while the first turn runs would be refused as busy).
    wait_for_turn_ends(sandbox, "deaf", 1)
    send("prompt", {"user_input": "second"})
    wait_for_turn_ends(sandbox, "deaf", 2)
    proc.stdin.close()
    code, stderr = finish(proc)
    assert code == 0
    assert stderr == ""
    types = wire_types(sandbox, "deaf")
    assert types.count("TurnBegin") == types.count("TurnEnd") == 2
    assert user_messages(sandbox, "deaf") == ["first", "second"]


def test_ctrl_c_in_print_mode_cancels_the_turn_and_exits_130(sandbox):
    started = sandbox.root / "started"
    sleep = f"30.{os.getpid() % 1000:03d}{time.monotonic_ns() % 1000:03d}"  # findable in /proc
    sandbox.scripts = [call("s1", "Shell", {"command": f"touch {started}; sleep {sleep}"}), "text: never"]
    proc = spawn(sandbox, *print_mode(sandbox, "interrupted"))
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    code, stderr = finish(proc)
    assert code == 130
    assert "Traceback" not in stderr
    types = wire_types(sandbox, "interrupted")
    assert types[0] == "TurnBegin" and types[-1] == "TurnEnd"
    assert not processes_running(f"sleep {sleep}")  # the command was killed with the turn
    prompt, note = user_messages(sandbox, "interrupted")  # the turn was cut short: the model is told
    assert prompt == "hi" and note.startswith("<system>Interrupted: the turn was cancelled")


def test_ctrl_c_in_the_demo_ends_it_and_its_engine_with_130(sandbox):
    proc = spawn(sandbox, "demo")
    assert proc.stdout is not None
    assert proc.stdout.readline()  # the engine answered `initialize`
    [engine] = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(p) == proc.pid and b"--wire" in (p / "cmdline").read_bytes()
    ]
    engine_input = str(Path(f"/proc/{engine}/fd/0").readlink())  # the pipe the demo writes to
    os.kill(engine, signal.SIGSTOP)  # hold the demo mid-way, deterministically
    try:
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        while engine_input in _open_files(proc.pid):  # the demo handles it: it closes the input
            assert time.monotonic() < deadline, "the demo did not react to Ctrl-C"
            time.sleep(0.02)  # a poll's step, bounded by the deadline above
    finally:
        os.kill(engine, signal.SIGCONT)
    code, stderr = finish(proc)
    assert code == 130
    assert "Traceback" not in stderr
    assert not Path(f"/proc/{engine}").exists() or _state(engine) == "Z"


def _open_files(pid: int) -> set[str]:
    found: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            found.add(str(fd.readlink()))
        except OSError:
            continue
    return found


def _parent(entry: Path) -> int:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return -1


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
