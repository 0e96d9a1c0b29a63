"""The sandbox with real bubblewrap, in the real engine: in each mode, commands that write
outside the workspace, read a private key, open a socket to 127.0.0.1, follow a symlink out
of the workspace or leave a process behind are stopped (or not, with `off`), the same work
inside the workspace succeeds, and the file tools obey the same policy."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.test_cli import soulwire
from tests.e2e.test_shell_tool import processes_running, unique_sleep, wait_until_gone
from tests.tool_calls import call, one_step_each, results, run_turn
from tests.wire_client import Sandbox, WireProcess, payloads

KEY = "FAKE-PRIVATE-KEY-0123456789"
SSH_CONFIG = "Host example-host-from-ssh-config"
OUTSIDE_TEXT = "text outside the workspace"


needs_bwrap = pytest.mark.usefixtures("bwrap")


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.port: int = self.server.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def connections(self, expected: int, limit: float = 3.0) -> int:
        """The number accepted, once it reaches `expected` (or after `limit` seconds): the
        accepting thread may lag behind a client that has already gone."""
        deadline = time.monotonic() + limit
        while self.accepted < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.accepted

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.server.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


class Scene:
    """The test's world: a fake HOME with secrets, a directory outside the workspace, and
    symlinks from the workspace to both."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        home, work = sandbox.home, sandbox.work
        self.outside = sandbox.root / "outside"
        for directory in (home / ".ssh", home / ".aws", work, self.outside):
            directory.mkdir(parents=True, exist_ok=True)
        self.key = home / ".ssh" / "id_rsa"
        self.key.write_text(KEY + "\n")
        (home / ".ssh" / "config").write_text(SSH_CONFIG + "\n")
        (home / ".aws" / "config").write_text("[default]\nregion = nowhere-1\n")
        self.outside_file = self.outside / "target.txt"
        self.outside_file.write_text(OUTSIDE_TEXT + "\n")
        (work / "link_out").symlink_to(self.outside_file)
        (work / "link_key").symlink_to(self.key)
        (work / "link_ssh_config").symlink_to(home / ".ssh" / "config")


@pytest.fixture
def scene(sandbox: Sandbox) -> Scene:
    return Scene(sandbox)


def mode_args(mode: str) -> tuple[str, ...]:
    return ("--sandbox", mode)


def shell(call_id: str, command: str, **extra: Any) -> tuple[str, str, dict[str, Any]]:
    return (call_id, "Shell", {"command": command, **extra})


def failed(value: dict[str, Any]) -> bool:
    return bool(value["is_error"])


MODES = ["off", "read-only", "workspace-write"]


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
def test_commands_are_stopped_at_the_boundaries_of_each_mode(engine, scene: Scene, listener: Listener, mode):
    marker = unique_sleep()
    outside = scene.outside
    connect = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
        f"{listener.port}), timeout=5); print('connected')\""
    )
    wire = engine(
        *one_step_each(
            shell("inside", "echo written > inside.txt && cat inside.txt"),
            shell("tmp", 'f="${TMPDIR:-/tmp}/t.$$" && echo temp > "$f" && cat "$f" && rm "$f"'),
            shell("outside", f"echo written > {outside}/new.txt"),
            shell("key", "cat ~/.ssh/id_rsa"),
            shell("key_link", "cat link_key"),
            shell("socket", connect),
            shell("link_read", "cat link_out"),
            shell("link_write", "echo overwritten > link_out"),
            shell("leftover", f"nohup sleep {marker} > /dev/null 2>&1 & echo started"),
        ),
        args=("--yolo", *mode_args(mode)),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    statuses = payloads(messages, "StatusUpdate")
    if mode == "off":  # no sandbox: the StatusUpdates are what clients knew before
        assert statuses and all("sandbox" not in s for s in statuses)
    else:
        assert statuses and all(s["sandbox"] == {"mode": mode, "network": False} for s in statuses)

    # Reading outside the workspace (not a secret) works everywhere, as does the private tmp.
    assert values["link_read"]["output"] == OUTSIDE_TEXT + "\n"
    assert values["tmp"]["output"] == "temp\n"
    leftovers = wait_until_gone(marker, limit=2.0)
    if mode == "off":
        assert values["inside"]["output"] == "written\n"
        assert (outside / "new.txt").read_text() == "written\n"
        assert values["key"]["output"] == KEY + "\n" and values["key_link"]["output"] == KEY + "\n"
        assert values["socket"]["output"] == "connected\n" and listener.connections(1) == 1
        assert scene.outside_file.read_text() == "overwritten\n"
        assert leftovers, "without a sandbox a detached process outlives its command"
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        return
    if mode == "read-only":
        assert failed(values["inside"]) and "Read-only file system" in values["inside"]["output"]
        assert not (scene.sandbox.work / "inside.txt").exists()
    else:
        assert values["inside"]["output"] == "written\n"
        assert (scene.sandbox.work / "inside.txt").read_text() == "written\n"
    assert failed(values["outside"]) and "Read-only file system" in values["outside"]["output"]
    assert not (outside / "new.txt").exists()
    # The sandbox tells the model it may ask to leave it.
    assert "sandbox_escape" in values["outside"]["message"]
    for key in ("key", "key_link"):
        assert failed(values[key]) and KEY not in values[key]["output"]
        assert "No such file or directory" in values[key]["output"]
    assert failed(values["socket"]) and "connected" not in values["socket"]["output"]
    assert listener.accepted == 0
    assert failed(values["link_write"]) and "Read-only file system" in values["link_write"]["output"]
    assert scene.outside_file.read_text() == OUTSIDE_TEXT + "\n"
    assert leftovers == [], "the PID namespace ends with the command"


@needs_bwrap
def test_network_can_be_allowed_inside_the_sandbox(engine, scene: Scene, listener: Listener):
    command = f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo connected"
    wire = engine(
        *one_step_each(shell("socket", command), shell("outside", f"echo x > {scene.outside}/n.txt")),
        args=("--yolo", "--sandbox", "workspace-write", "--sandbox-network", "on"),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["socket"]["output"] == "connected\n" and listener.connections(1) == 1
    assert failed(values["outside"])  # the file system is still confined
    assert payloads(messages, "StatusUpdate")[0]["sandbox"] == {"mode": "workspace-write", "network": True}


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
def test_background_tasks_run_in_the_same_sandbox(engine, scene: Scene, mode):
    marker = unique_sleep()
    command = (
        f"nohup sleep {marker} > /dev/null 2>&1 & "
        f"echo x > {scene.outside}/bg.txt; echo done > bg_done.txt; echo finished"
    )
    wire = engine(
        *one_step_each(("bg", "Shell", {"command": command, "run_in_background": True, "description": "bg"})),
        args=("--yolo", "--sandbox", mode, "--sandbox-network", "off"),
    )
    messages, _ = run_turn(wire, answer=None)
    assert not results(messages)["bg"]["is_error"]
    done = scene.sandbox.work / "bg_done.txt"
    if mode == "read-only":
        assert wait_until_gone(marker, limit=5.0) == []
        assert not done.exists()
    else:
        deadline = 50
        while not done.exists() and deadline:
            deadline -= 1
            threading.Event().wait(0.1)
        assert done.read_text() == "done\n"
        if mode == "off":
            assert (scene.outside / "bg.txt").exists() and processes_running(marker)
        else:
            assert wait_until_gone(marker, limit=5.0) == []
    if mode != "off":
        assert not (scene.outside / "bg.txt").exists()
    wire.close()
    assert wait_until_gone(marker) == []


@needs_bwrap
def test_a_background_command_kept_alive_stays_in_the_sandbox(scene: Scene):
    """`[background] keep_alive_on_exit`: a sandboxed background command outlives the engine
    (bubblewrap is not tied to it) and is as confined after the engine's exit as before."""
    sandbox = scene.sandbox
    sandbox.config_extra = {"background": {"keep_alive_on_exit": True}}
    command = (
        f"while [ ! -e go ]; do sleep 0.02; done; echo x > {scene.outside}/late.txt; echo later > kept.txt"
    )
    sandbox.scripts = [
        call("bg1", "Shell", {"command": command, "run_in_background": True, "description": "kept"}),
        "text: started it",
    ]
    config = ("--config-file", str(sandbox.config_path))
    out = soulwire(sandbox, "--print", "-p", "go", "--yolo", "--sandbox", "workspace-write", *config)
    assert out.returncode == 0, out.stderr
    assert "left 1 background command running" in out.stderr
    (sandbox.work / "go").touch()  # the engine has exited
    deadline = time.monotonic() + 10
    while not (sandbox.work / "kept.txt").exists():
        assert time.monotonic() < deadline, "the sandboxed command did not outlive the engine"
        time.sleep(0.02)
    assert not (scene.outside / "late.txt").exists()


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
def test_file_tools_obey_the_same_policy(engine, scene: Scene, mode):
    home = scene.sandbox.home
    wire = engine(
        *one_step_each(
            ("read_ssh_config", "ReadFile", {"path": str(home / ".ssh" / "config")}),
            ("read_link_ssh", "ReadFile", {"path": "link_ssh_config"}),
            ("read_aws", "ReadFile", {"path": "~/.aws/config"}),
            ("read_link_out", "ReadFile", {"path": "link_out"}),
            ("grep_home", "Grep", {"pattern": "example-host", "path": str(home), "include_ignored": True}),
            ("glob_ssh", "Glob", {"pattern": "*", "directory": str(home / ".ssh")}),
            ("write_inside", "WriteFile", {"path": "made.txt", "content": "inside\n"}),
            ("write_outside", "WriteFile", {"path": str(scene.outside / "made.txt"), "content": "x\n"}),
            ("write_link", "StrReplaceFile", {"path": "link_out", "edit": {"old": "text", "new": "TEXT"}}),
        ),
        args=("--yolo", "--sandbox", mode),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    assert "outside the workspace" in values["read_link_out"]["output"]  # the shell may read it too
    if mode == "off":
        assert SSH_CONFIG in values["read_ssh_config"]["output"]
        assert SSH_CONFIG in values["read_link_ssh"]["output"]
        assert "nowhere-1" in values["read_aws"]["output"]
        assert ".ssh/config" in values["grep_home"]["output"]
        assert "config" in values["glob_ssh"]["output"]
        assert (scene.outside / "made.txt").exists()
        assert scene.outside_file.read_text() == "TEXT outside the workspace\n"
        return
    for key in ("read_ssh_config", "read_link_ssh", "read_aws", "glob_ssh"):
        assert failed(values[key]), key
        assert values[key]["display"] == [{"type": "brief", "text": "Hidden by the sandbox"}]
        assert SSH_CONFIG not in values[key]["output"]
    assert SSH_CONFIG not in values["grep_home"]["output"] and ".ssh" not in values["grep_home"]["output"]
    boundary = "writes in a read-only sandbox" if mode == "read-only" else "writes outside the workspace"
    for key in ("write_outside", "write_link"):
        value = values[key]
        assert failed(value) and f"leave the sandbox ({boundary})" in value["message"]
        assert "yolo" in value["message"]
    assert not (scene.outside / "made.txt").exists()
    assert scene.outside_file.read_text() == OUTSIDE_TEXT + "\n"
    if mode == "read-only":
        assert (
            failed(values["write_inside"])
            and "writes in a read-only sandbox" in values["write_inside"]["message"]
        )
        assert not (scene.sandbox.work / "made.txt").exists()
    else:
        assert not failed(values["write_inside"])
        assert (scene.sandbox.work / "made.txt").read_text() == "inside\n"


@needs_bwrap
def test_a_timeout_kills_everything_the_sandboxed_command_started(engine, scene: Scene):
    marker = unique_sleep()
    wire = engine(
        *one_step_each(shell("t", f"echo started; sleep {marker} & sleep {marker}; wait", timeout=1)),
        args=("--yolo", "--sandbox", "workspace-write"),
    )
    messages, _ = run_turn(wire, answer=None)
    value = results(messages)["t"]
    assert value["is_error"] and value["message"] == "Command killed by timeout (1s)"
    assert value["output"] == "started\n"
    assert wait_until_gone(marker) == []


@needs_bwrap
def test_cancel_kills_the_sandboxed_command(engine, scene: Scene):
    marker = unique_sleep()
    wire = engine(
        call("tc-1", "Shell", {"command": f"sleep {marker} & sleep {marker}; wait"}),
        "text: after",
        args=("--yolo", "--sandbox", "read-only"),
    )
    wire.initialize()
    rid = wire.request("prompt", {"user_input": "sleep"})
    deadline = time.monotonic() + 10
    while len(processes_running(marker)) < 2:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    wire.request("cancel")
    _, response = wire.until_response(rid)
    assert response["result"] == {"status": "cancelled"}
    assert wait_until_gone(marker, limit=2.0) == []


@needs_bwrap
def test_secrets_inside_the_workspace_stay_hidden(engine, sandbox: Sandbox):
    """Work dir = HOME: the deeper rule wins, so ~/.ssh is hidden from commands and file tools."""
    scene = Scene(sandbox)
    home = sandbox.home
    sandbox.scripts = one_step_each(
        shell("ls", "ls -A .ssh; cat .ssh/config; echo home-write > note.txt && cat note.txt"),
        ("read", "ReadFile", {"path": ".ssh/config"}),
        ("grep", "Grep", {"pattern": "example-host", "include_ignored": True}),
    )
    sandbox.write()
    argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(sandbox.config_path)]
    wire = WireProcess(
        [*argv, "--work-dir", str(home), "--yolo", "--sandbox", "workspace-write"], sandbox.env(), home
    )
    try:
        messages, _ = run_turn(wire, answer=None)
    finally:
        wire.close()
    values = results(messages)
    assert values["ls"]["output"].endswith("home-write\n") and SSH_CONFIG not in values["ls"]["output"]
    assert values["read"]["display"] == [{"type": "brief", "text": "Hidden by the sandbox"}]
    assert SSH_CONFIG not in values["grep"]["output"] and ".ssh" not in values["grep"]["output"]
    assert scene.key.read_text() == KEY + "\n"


@needs_bwrap
def test_subagents_share_the_sessions_sandbox(engine, scene: Scene):
    long_answer = ("The sub-agent tried to write outside and could not; " * 5).strip()
    wire = engine(
        call("a1", "Agent", {"description": "write", "prompt": "write outside"}),
        call("s1", "Shell", {"command": f"echo sub > {scene.outside}/sub.txt; cat ~/.ssh/id_rsa"}),
        call("s2", "Shell", {"command": "echo x", "sandbox_escape": "full"}),
        f"text: {long_answer}",
        "text: parent done",
        args=("--yolo", "--sandbox", "workspace-write"),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    inner = {
        p["event"]["payload"]["tool_call_id"]: p["event"]["payload"]["return_value"]
        for p in payloads(messages, "SubagentEvent")
        if p["event"]["type"] == "ToolResult"
    }
    assert "Read-only file system" in inner["s1"]["output"] and KEY not in inner["s1"]["output"]
    assert inner["s2"]["display"] == [{"type": "brief", "text": "Sandbox escape refused"}]
    assert not (scene.outside / "sub.txt").exists()


@needs_bwrap
def test_added_dirs_are_part_of_the_workspace(engine, scene: Scene):
    extra = scene.outside / "extra"
    extra.mkdir()
    wire = engine(
        *one_step_each(
            shell("cmd", f"echo cmd > {extra}/cmd.txt && echo no > {scene.outside}/no.txt"),
            ("file", "WriteFile", {"path": str(extra / "file.txt"), "content": "file\n"}),
        ),
        args=("--yolo", "--sandbox", "workspace-write", "--add-dir", str(extra)),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert "Read-only file system" in values["cmd"]["output"] and not values["file"]["is_error"]
    assert (extra / "cmd.txt").read_text() == "cmd\n" and (extra / "file.txt").read_text() == "file\n"
    assert not (scene.outside / "no.txt").exists()


@needs_bwrap
@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_credentials_in_the_environment_are_not_passed_in(sandbox: Sandbox, mode: str):
    sandbox.scripts = one_step_each(
        shell("env", "echo key=$ACME_API_KEY token=$GH_TOKEN lang=$LANG_OF_TEST"),
        # The engine's own environment is not reachable through /proc either (own PID namespace).
        shell("proc", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^ACME_API_KEY='"),
    )
    sandbox.write()
    env = {**sandbox.env(), "ACME_API_KEY": "k-123", "GH_TOKEN": "t-456", "LANG_OF_TEST": "en"}
    wire = WireProcess(sandbox.argv("--yolo", "--sandbox", mode), env, sandbox.work)
    try:
        messages, _ = run_turn(wire, answer=None)
    finally:
        wire.close()
    values = results(messages)
    if mode == "off":
        assert values["env"]["output"] == "key=k-123 token=t-456 lang=en\n"
        assert int(values["proc"]["output"]) >= 1
    else:
        assert values["env"]["output"] == "key= token= lang=en\n"
        assert values["proc"]["output"] == "0\n"


@needs_bwrap
def test_plan_mode_writes_its_plan_file_in_a_sandbox(engine, sandbox: Sandbox):
    plan = sandbox.share / "plans" / "plan-session.md"  # inside the share dir, which is hidden
    wire = engine(
        *one_step_each(
            ("w1", "WriteFile", {"path": str(plan), "content": "1. do it\n"}),
            ("r1", "ReadFile", {"path": str(plan)}),
            ("c1", "Shell", {"command": f"cat {plan}"}),
        ),
        args=("--session", "plan-session", "--plan", "--sandbox", "workspace-write", "--yolo"),
    )
    wire.initialize(protocol_version="1.10", capabilities={"supports_plan_mode": True})
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert not values["w1"]["is_error"] and plan.read_text() == "1. do it\n"
    assert "1. do it" in values["r1"]["output"]
    assert "No such file or directory" in values["c1"]["output"]  # commands still cannot see it
