"""No tool process outlives the engine: SIGKILL the engine (or its whole process group) while a
Shell command, its backgrounded grandchildren, a background task or an MCP server runs, and
every one of them dies with it; the side effects they were about to have never happen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.tool_calls import call
from tests.waiting import engine_watchdogs, wait_until_exited
from tests.wire_client import Sandbox, WireProcess

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the processes")

DELAY_S = 1.5
"""How long the commands wait before their side effect; the engine is killed well before."""


def processes_with(tag: str) -> list[int]:
    """Live (non-zombie) processes whose command line or environment holds `tag`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the process group `pgid`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_for(predicate, limit: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def start_turn(wire: WireProcess) -> None:
    wire.initialize()
    wire.request("prompt", {"user_input": "go"})


def kill_engine(wire: WireProcess, *, whole_group: bool) -> list[int]:
    """SIGKILL the engine; its watchdogs (read before: after its death they are not its
    children any more), which do their work once it is dead."""
    watchdogs = engine_watchdogs(wire.proc.pid)
    if whole_group:  # what a client does that started the engine in a session of its own
        os.killpg(wire.proc.pid, signal.SIGKILL)
    else:
        wire.proc.kill()
    wire.proc.wait(timeout=10)
    return watchdogs


def assert_nothing_survives(
    tag: str, markers: list[Path], groups: tuple[Path, ...] = (), watchdogs: list[int] | None = None
) -> None:
    """No process with `tag` in its command line and none of the process groups whose ids
    the commands wrote into `groups` is left; the side effects never happen: each would be
    made by one of those processes, so once the engine's watchdogs have done their work and
    exited and those processes are gone, no marker can appear any more."""
    pgids = [int(p.read_text()) for p in groups]
    if watchdogs is not None:
        assert watchdogs, "the engine had no watchdog"
        wait_until_exited(watchdogs, what="the engine's watchdog")
    assert wait_for(lambda: not processes_with(tag), limit=5), f"left running: {processes_with(tag)}"
    assert wait_for(lambda: not any(group_members(g) for g in pgids), limit=5)
    assert [m.name for m in markers if m.exists()] == []


@pytest.mark.parametrize("whole_group", [False, True], ids=["engine", "engine-group"])
def test_a_foreground_command_and_its_grandchildren_die_with_the_engine(engine, sandbox, whole_group):
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    direct, child, nohup = (sandbox.root / n for n in ("direct", "grandchild", "nohup"))
    command = (
        f"(sleep {DELAY_S}; touch {child}) & "
        f"nohup sh -c 'sleep {DELAY_S}; touch {nohup}' >/dev/null 2>&1 & "
        f"sleep {DELAY_S}; touch {direct}; : {tag}"
    )
    started, pgid = sandbox.root / "started", sandbox.root / "pgid"
    wire = engine(
        call("c1", "Shell", {"command": f"echo $$ > {pgid}; touch {started}; {command}", "timeout": 60}),
        "text: done",
        args=("--yolo",),
    )
    start_turn(wire)
    assert wait_for(lambda: started.exists() and len(processes_with(tag)) >= 1)
    assert len(group_members(int(pgid.read_text()))) >= 3  # bash, its subshell, sleeps, nohup sh
    watchdogs = kill_engine(wire, whole_group=whole_group)
    assert_nothing_survives(tag, [direct, child, nohup], groups=(pgid,), watchdogs=watchdogs)


def test_a_background_task_dies_with_the_engine(engine, sandbox):
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    marker, started = sandbox.root / "bg-marker", sandbox.root / "bg-started"
    pgid = sandbox.root / "bg-pgid"
    command = (
        f"echo $$ > {pgid}; touch {started}; (sleep {DELAY_S}; touch {marker}.child) & "
        f"sleep {DELAY_S}; touch {marker}; : {tag}"
    )
    wire = engine(
        call("b1", "Shell", {"command": command, "run_in_background": True, "description": "slow"}),
        "text: started",
        args=("--yolo",),
    )
    wire.initialize()
    _, response = wire.prompt("go")
    assert response["result"]["status"] == "finished"
    assert wait_for(started.exists)
    watchdogs = kill_engine(wire, whole_group=False)
    assert_nothing_survives(tag, [marker, Path(f"{marker}.child")], groups=(pgid,), watchdogs=watchdogs)


SPAWN_UNNAMED = """
import subprocess, sys
from soulwire.tools.lifetime import ready_to_tie
env = ready_to_tie()
process = subprocess.Popen(["sh", "-c", sys.argv[1]], env=env, start_new_session=True)
print(process.pid, flush=True)
sys.stdin.read()  # killed here, before `tie_to_engine` names the group to the watchdog
"""


def test_a_tool_process_the_engine_had_no_time_to_name_dies_with_it(sandbox: Sandbox):
    """The engine is killed after a tool process started and before it told the watchdog its
    group: under CPU load the command runs ahead of the engine's thread, and a test saw a
    Shell command outlive a SIGKILLed `serve` that way. The spawn's mark finds it."""
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    marker = sandbox.root / "unnamed"
    engine = subprocess.Popen(
        [sys.executable, "-c", SPAWN_UNNAMED, f"(sleep {DELAY_S}; touch {marker}) & sleep 60; : {tag}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert engine.stdout is not None
        pgid = int(engine.stdout.readline())
        assert wait_for(lambda: len(group_members(pgid)) >= 2)  # sh, its subshell, the sleeps
    finally:
        engine.kill()
        engine.wait(timeout=10)
    assert wait_for(lambda: not group_members(pgid), limit=30), group_members(pgid)
    assert not marker.exists() and processes_with(tag) == []


@pytest.mark.parametrize("ending", ["sigkill", "stdin-closed"])
def test_a_detached_job_of_a_finished_command_dies_with_the_engine(engine, sandbox, ending):
    """`server > log 2>&1 &` outlives its command on purpose, but not the engine, whether it
    is killed or ends normally."""
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    marker = sandbox.root / "detached"
    command = f"(sleep {DELAY_S}; touch {marker}; : {tag}) > /dev/null 2>&1 &"
    wire = engine(call("d1", "Shell", {"command": command}), "text: done", args=("--yolo",))
    wire.initialize()
    _, response = wire.prompt("go")
    assert response["result"]["status"] == "finished"
    assert processes_with(tag)
    watchdogs = engine_watchdogs(wire.proc.pid)
    if ending == "sigkill":
        kill_engine(wire, whole_group=False)
    else:
        assert wire.close() == 0
    assert_nothing_survives(tag, [marker], watchdogs=watchdogs)


MCP_SERVER = """
import sys, time, os
open(sys.argv[1], "w").write(str(os.getpid()))
sys.stdin.close()  # a server that would not notice its client is gone
os.close(0)
time.sleep(60)
"""


def test_an_mcp_server_that_ignores_eof_dies_with_the_engine(engine, sandbox: Sandbox):
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    script = sandbox.root / "stubborn_server.py"
    script.write_text(MCP_SERVER, encoding="utf-8")
    pidfile = sandbox.root / "mcp-pid"
    servers = {
        "mcpServers": {"stubborn": {"command": sys.executable, "args": [str(script), str(pidfile), tag]}}
    }
    wire = engine("text: hi", args=("--mcp-config", json.dumps(servers)))
    wire.initialize()
    assert wait_for(pidfile.exists)
    assert wait_for(lambda: bool(processes_with(tag)))
    # The engine ties the server to its life once it has started it (the server does not know
    # when): a watchdog is started with every group told so far already in its pipe.
    assert wait_for(lambda: bool(engine_watchdogs(wire.proc.pid)))
    kill_engine(wire, whole_group=False)
    assert wait_for(lambda: not processes_with(tag), limit=5), processes_with(tag)


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def test_a_killed_watchdog_is_replaced_at_the_next_tool_process(engine, sandbox):
    tag = f"lifetime-{uuid.uuid4().hex[:12]}"
    marker, started = sandbox.root / "after-restart", sandbox.root / "started"
    wire = engine(
        call("c1", "Shell", {"command": "true"}),
        # A long sleep: under load the approval round trip and the watchdog's replacement can
        # take seconds; the command (found by its tag) must still be running when the engine dies.
        call("c2", "Shell", {"command": f"touch {started}; sleep 8; touch {marker}; : {tag}"}),
        "text: done",
    )

    def watchdogs() -> list[int]:
        return engine_watchdogs(wire.proc.pid)

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        payload = message["params"]["payload"]
        if payload["tool_call_id"] == "c2":  # c1 has run: kill its watchdog before c2 starts
            assert wait_for(lambda: len(watchdogs()) == 1), [
                (p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in children_of(wire.proc.pid)
            ]
            [watchdog] = watchdogs()
            os.kill(watchdog, signal.SIGKILL)
            assert wait_for(lambda: not watchdogs())
        return {"request_id": payload["id"], "response": "approve"}

    wire.initialize()
    prompt = wire.request("prompt", {"user_input": "go"})
    with pytest.raises(TimeoutError):  # the turn is still running when the engine is killed
        wire.until_response(prompt, answer=answer, timeout=3)
    assert wait_for(lambda: started.exists() and bool(processes_with(tag)))
    assert wait_for(lambda: len(watchdogs()) == 1), (  # a new one; else say what there is
        wire.proc.poll(),
        [(p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in children_of(wire.proc.pid)],
    )
    replaced = kill_engine(wire, whole_group=False)
    assert_nothing_survives(tag, [marker], watchdogs=replaced)
