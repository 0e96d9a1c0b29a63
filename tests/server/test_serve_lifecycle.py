"""Lifecycle: cancel over the socket stops the tool's process, SIGTERM winds every session
down (processes gone, exit 0), and a session nobody uses is released for other processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.server.serve_client import ServeProcess
from tests.tool_calls import call
from tests.wire_client import Sandbox, WireProcess


def long_running(pid_file: Path) -> str:
    return call("tc-1", "Shell", {"command": f"echo $$ > {pid_file}; exec sleep 60", "timeout": 120})


def wait_for_pid(pid_file: Path) -> int:
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text().strip():
            return int(pid_file.read_text())
        time.sleep(0.02)
    raise AssertionError("the tool never started")


def gone(pid: int, limit: float = 30) -> bool:
    """Whether the process ends within `limit` s (a zombie nobody reaps counts as gone)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_cancel_over_the_socket_kills_the_tool_process(serve, sandbox):
    pid_file = sandbox.root / "tool.pid"
    server = serve(long_running(pid_file), "text: after", args=("--yolo",))
    ws = server.ws(server.create_session())
    ws.initialize()
    prompt = ws.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    _, cancelled = ws.call("cancel")
    assert cancelled["result"] == {}
    ws.until(lambda m: m.get("id") == prompt)
    assert gone(pid)


def test_sigterm_winds_down_running_sessions(serve, sandbox):
    pid_file = sandbox.root / "tool.pid"
    server = serve(long_running(pid_file), args=("--yolo",))
    session_id = server.create_session()
    ws = server.ws(session_id)
    ws.initialize()
    ws.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    directory = Path(server.api("GET", f"/api/sessions/{session_id}").json()["dir"])
    assert server.close() == 0
    assert gone(pid)
    assert "soulwire serve: stopped" in "".join(server.stderr_lines)
    # The process ends without the interpreter's teardown, but only once the session's files
    # are written to the end: the cancelled turn's end is the last record.
    last = (directory / "wire.jsonl").read_text().splitlines()[-1]
    assert '"type": "TurnEnd"' in last, last


def test_sigterm_stops_a_server_whose_stdin_its_parent_still_holds(serve):
    # A fleet holds each engine's stdin (--exit-with-stdin) and stops it with SIGTERM: the
    # thread reading stdin must not keep the process alive until the pipe closes.
    server = serve(args=("--exit-with-stdin",), stdin=subprocess.PIPE)
    server.create_session()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_start_up_stops_the_server_quietly(sandbox: Sandbox, sig: int):
    # Sent once the address is printed, while the app is still being imported. SIGINT comes
    # ignored here, as in a background job of a non-interactive shell: it was lost then, and
    # the server ran on; SIGTERM killed the process (-15) instead of stopping it.
    sandbox.write()
    argv = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', sys.executable, "-m", "soulwire", "serve",
            "--listen", "127.0.0.1:0", "--config-file", str(sandbox.config_path),
            "--work-dir", str(sandbox.work)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=sandbox.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert "listening on" in proc.stderr.readline()
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        rest = proc.stderr.read()
        assert "soulwire serve: stopped" in rest and "Traceback" not in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_end_of_stdin_stops_a_server_started_with_exit_with_stdin(serve):
    server = serve(args=("--exit-with-stdin",), stdin=subprocess.PIPE)
    server.create_session()
    assert server.proc.stdin is not None
    server.proc.stdin.close()  # the parent died
    assert server.proc.wait(timeout=10) == 0
    assert "soulwire serve: stopped" in "".join(server.stderr_lines)


def test_an_idle_session_is_released_for_the_cli(serve, sandbox):
    server: ServeProcess = serve("text: on the server", "text: on the cli", args=("--idle-timeout", "0.2"))
    session = server.create_session()
    ws = server.ws(session)
    ws.initialize()
    ws.call("prompt", {"user_input": "one"})
    ws.close()
    for _ in range(250):  # the server closes the session soon after its last client left
        if not server.api("GET", f"/api/sessions/{session}").json()["live"]:
            break
        time.sleep(0.02)
    wire = WireProcess(sandbox.argv("--session", session), sandbox.env(), sandbox.work)
    wire.initialize()
    _, response = wire.prompt("two")
    assert response["result"]["status"] == "finished"
    assert wire.close() == 0


def test_a_killed_server_leaves_no_tool_process_behind(serve, sandbox):
    import signal

    pid_file = sandbox.root / "tool.pid"
    server = serve(long_running(pid_file), args=("--yolo",))
    ws = server.ws(server.create_session())
    ws.initialize()
    ws.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    os.kill(server.proc.pid, signal.SIGKILL)  # no chance to clean up: the tool's lifetime tie does
    server.proc.wait()
    assert gone(pid)


def test_cancel_answers_with_a_receipt_of_what_it_stopped_and_left_running(serve, sandbox):
    bg_pid_file = sandbox.root / "bg.pid"
    background = call(
        "bg-1",
        "Shell",
        {"command": f"echo $$ > {bg_pid_file}; exec sleep 60", "run_in_background": True, "description": "w"},
    )
    pid_file = sandbox.root / "tool.pid"
    server = serve(background, "text: started", long_running(pid_file), "text: after", args=("--yolo",))
    ws = server.ws(server.create_session())
    ws.initialize(serve={"seq": True})
    _, started = ws.call("prompt", {"user_input": "start a watcher"})
    assert started["result"]["status"] == "finished"
    bg_pid = wait_for_pid(bg_pid_file)
    prompt = ws.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    seen, cancelled = ws.call("cancel", timeout=30)
    from soulwire.server.protocol import CancelResult

    CancelResult.model_validate(cancelled["result"], strict=True)  # the documented shape
    receipt = cancelled["result"]["receipt"]
    assert any(m.get("id") == prompt for m in seen)  # answered once the turn has wound down
    assert receipt["stopped"]["tool_calls"] == [{"id": "tc-1", "name": "Shell"}]
    assert receipt["stopped"]["process_groups"] == [pid] and gone(pid)
    assert receipt["stopped"]["subagents"] == [] and receipt["survived"] == []
    (kept,) = receipt["left_running"]["background_tasks"]
    assert kept["pgid"] == bg_pid and kept["description"] == "w"
    os.kill(bg_pid, 0)  # deliberately left running
