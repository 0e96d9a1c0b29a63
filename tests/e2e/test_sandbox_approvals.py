"""Approvals that know the sandbox, the sandbox kept with the session, and refusing to start
where bubblewrap cannot run — all in the real engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.test_sandbox import KEY, OUTSIDE_TEXT, Listener, Scene, needs_bwrap, shell
from tests.system_tools import require_bwrap
from tests.tool_calls import approve, one_step_each, requests, results, run_turn
from tests.wire_client import Sandbox, payloads


@pytest.fixture
def scene(sandbox: Sandbox) -> Scene:
    return Scene(sandbox)


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def answer_by_boundary(message: dict[str, Any]) -> dict[str, Any]:
    """Approve leaving the sandbox for commands; reject (with feedback) anything else."""
    payload = message["params"]["payload"]
    if payload["sender"] == "Shell":
        return approve(message)
    return {"request_id": payload["id"], "response": "reject", "feedback": "not that"}


@needs_bwrap
def test_on_escape_asks_only_for_leaving_the_sandbox(
    engine, sandbox: Sandbox, scene: Scene, listener: Listener
):
    sandbox.config_extra = {"approval": "on-escape", "sandbox": "workspace-write"}
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{listener.port} && echo connected"
    outside = scene.outside
    wire = engine(
        *one_step_each(
            shell("inside", "echo in > a.txt && cat a.txt"),
            ("write_inside", "WriteFile", {"path": "b.txt", "content": "b\n"}),
            ("read_outside", "ReadFile", {"path": str(scene.outside_file)}),
            shell("net_denied", connect),
            shell("net", connect, sandbox_escape="network"),
            shell("write", f"echo escaped > {outside}/esc.txt; cat ~/.ssh/id_rsa", sandbox_escape="write"),
            ("write_outside", "WriteFile", {"path": str(outside / "w.txt"), "content": "w\n"}),
            ("fetch", "FetchURL", {"url": f"http://127.0.0.1:{listener.port}/"}),
        )
    )
    wire.initialize()
    messages, result = run_turn(wire, answer=answer_by_boundary)
    assert result == {"status": "finished"}
    values = results(messages)
    asked = requests(messages)
    # Only the actions that leave the sandbox were asked, each naming its boundary.
    assert [(r["tool_call_id"], r["action"]) for r in asked] == [
        ("net", "run command (leaves the sandbox: network)"),
        ("write", "run command (leaves the sandbox: write)"),
        ("write_outside", "edit file (leaves the sandbox: write)"),
        ("fetch", "fetch URL (leaves the sandbox: network)"),
    ]
    descriptions = [r["description"] for r in asked]
    assert descriptions[0].endswith("— it leaves the sandbox: network access")
    assert descriptions[1].endswith("— it leaves the sandbox: writes outside the workspace")
    assert descriptions[2].endswith("— it leaves the sandbox: writes outside the workspace")
    assert descriptions[3].endswith("— it leaves the sandbox: network access")
    assert asked[0]["display"][0] == {"type": "brief", "text": "Leaves the sandbox: network access"}
    # Inside the sandbox everything ran without asking.
    assert values["inside"]["output"] == "in\n"
    assert (sandbox.work / "b.txt").read_text() == "b\n"
    assert OUTSIDE_TEXT in values["read_outside"]["output"]
    assert values["net_denied"]["is_error"]
    # Approved escapes ran as approved, and no further.
    assert values["net"]["output"] == "connected\n"
    assert (outside / "esc.txt").read_text() == "escaped\n"
    assert KEY not in values["write"]["output"]  # leaving for writes does not reveal secrets
    # Rejected ones did nothing.
    assert not (outside / "w.txt").exists() and values["write_outside"]["is_error"]
    assert values["fetch"]["is_error"] and listener.connections(1) == 1  # only the approved command


@needs_bwrap
def test_ask_mode_still_asks_inside_the_sandbox(engine, scene: Scene):
    wire = engine(*one_step_each(shell("inside", "echo in")), args=("--sandbox", "workspace-write"))
    wire.initialize()
    messages, _ = run_turn(wire, answer=approve)
    (asked,) = requests(messages)
    assert asked["action"] == "run command" and asked["description"] == "Run command `echo in`"
    assert results(messages)["inside"]["output"] == "in\n"


@needs_bwrap
def test_yolo_never_leaves_the_sandbox(engine, scene: Scene):
    wire = engine(
        *one_step_each(shell("esc", f"echo x > {scene.outside}/y.txt", sandbox_escape="full")),
        args=("--yolo", "--sandbox", "workspace-write"),
    )
    wire.initialize()
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"} and requests(messages) == []
    value = results(messages)["esc"]
    assert value["is_error"] and value["display"] == [{"type": "brief", "text": "Sandbox escape refused"}]
    assert "leave the sandbox (the whole sandbox" in value["message"] and "yolo" in value["message"]
    assert not (scene.outside / "y.txt").exists()


@needs_bwrap
def test_the_sandbox_is_kept_with_the_session(engine, sandbox: Sandbox):
    session = ["--session", "sandboxed-session"]
    first = engine("text: one", args=(*session, "--sandbox", "read-only", "--sandbox-network", "on"))
    messages, _ = run_turn(first, answer=None)
    assert payloads(messages, "StatusUpdate")[-1]["sandbox"] == {"mode": "read-only", "network": True}
    assert first.close() == 0
    state_file = next(sandbox.share.glob("sessions/*/sandboxed-session/state.json"))
    state = json.loads(state_file.read_text())
    assert state["sandbox"] == {"mode": "read-only", "network": True}
    resumed = engine("text: two", args=tuple(session))
    messages, _ = run_turn(resumed, answer=None)
    assert payloads(messages, "StatusUpdate")[-1]["sandbox"] == {"mode": "read-only", "network": True}
    assert resumed.close() == 0
    overridden = engine("text: three", args=(*session, "--sandbox", "off"))
    messages, _ = run_turn(overridden, answer=None)
    assert "sandbox" not in payloads(messages, "StatusUpdate")[-1]
    assert json.loads(state_file.read_text())["sandbox"]["mode"] == "off"


@needs_bwrap
def test_a_session_that_never_chose_follows_the_config(engine, sandbox: Sandbox):
    sandbox.config_extra = {"sandbox": "read-only"}
    session = ("--session", "config-session")
    first = engine("text: one", args=session)
    messages, _ = run_turn(first, answer=None)
    assert payloads(messages, "StatusUpdate")[-1]["sandbox"] == {"mode": "read-only", "network": False}
    state_file = next(sandbox.share.glob("sessions/*/config-session/state.json"))
    assert "sandbox" not in json.loads(state_file.read_text())
    assert first.close() == 0  # one process per session: the next one opens it after this one
    sandbox.config_extra = {"sandbox": "workspace-write", "sandbox_network": True}
    messages, _ = run_turn(engine("text: two", args=session), answer=None)
    assert payloads(messages, "StatusUpdate")[-1]["sandbox"] == {"mode": "workspace-write", "network": True}


def _run_without_bwrap(sandbox: Sandbox, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    sandbox.write()
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    env = {**sandbox.env(), "PATH": str(empty)}  # bwrap cannot be found
    return subprocess.run(
        [*sandbox.argv(*args)],
        input="",
        capture_output=True,
        text=True,
        env=env,
        cwd=sandbox.work,
        timeout=30,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the message differs off Linux")
def test_refuses_to_start_when_bubblewrap_cannot_run(sandbox: Sandbox, tmp_path: Path):
    for args in (("--sandbox", "read-only"), ("--sandbox", "workspace-write", "--yolo")):
        run = _run_without_bwrap(sandbox, tmp_path, *args)
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr.splitlines() == [
            f"soulwire: cannot start with --sandbox {args[1]}: bubblewrap (`bwrap`) is not installed; "
            "install the `bubblewrap` package"
        ]
    sandbox.config_extra = {"sandbox": "workspace-write"}  # asked for by the config: the same
    run = _run_without_bwrap(sandbox, tmp_path)
    assert run.returncode == 2 and "cannot start with --sandbox workspace-write" in run.stderr
    run = _run_without_bwrap(sandbox, tmp_path, "--sandbox", "off")  # turned off explicitly
    assert run.returncode == 0, run.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the message differs off Linux")
def test_doctor_reports_whether_the_sandbox_can_run(sandbox: Sandbox, tmp_path: Path):
    sandbox.write()
    soulwire = [sys.executable, "-m", "soulwire", "doctor", "--json"]
    empty = tmp_path / "empty-path"
    empty.mkdir()
    missing = subprocess.run(
        soulwire, capture_output=True, text=True, env={**sandbox.env(), "PATH": str(empty)}, timeout=30
    )
    assert missing.returncode == 1
    sandbox_check = json.loads(missing.stdout)["sandbox"]
    assert (sandbox_check["ok"], sandbox_check["detail"]) == (
        False,
        "bubblewrap (`bwrap`) is not installed; install the `bubblewrap` package",
    )
    require_bwrap()
    present = subprocess.run(soulwire, capture_output=True, text=True, env=sandbox.env(), timeout=30)
    assert json.loads(present.stdout)["sandbox"]["ok"] is True


@needs_bwrap
def test_searchweb_leaves_a_sandbox_without_network_only_with_a_person(engine, sandbox: Sandbox):
    """The query is text the model chose, sent to a service: in a sandbox without network
    each search asks (naming the boundary), a rejected or yolo one sends nothing, and with
    the sandbox's network on it goes out as everywhere else."""
    from tests.fake_services import FakePlatform

    search = ("search", "SearchWeb", {"query": "the secret plan"})
    with FakePlatform() as platform:
        service = {"moonshot_search": {"base_url": f"{platform.url}/search", "api_key": "sk-good"}}
        sandbox.config_extra = {"services": service, "approval": "on-escape"}
        asked = engine(*one_step_each(search), args=("--sandbox", "workspace-write"))
        messages, _ = run_turn(asked, answer=answer_by_boundary)  # rejected
        (request,) = requests(messages)
        assert request["action"] == "search web (leaves the sandbox: network)"
        assert request["description"] == (
            f"Search the web for `the secret plan` (sent to {platform.url.removeprefix('http://')})"
            " — it leaves the sandbox: network access"
        )
        assert results(messages)["search"]["is_error"]
        assert asked.close() == 0
        yolo = engine(*one_step_each(search), args=("--yolo", "--sandbox", "workspace-write"))
        messages, _ = run_turn(yolo, answer=approve)
        assert requests(messages) == []
        assert results(messages)["search"]["display"] == [{"type": "brief", "text": "Sandbox escape refused"}]
        assert yolo.close() == 0
        assert platform.paths() == []  # nothing was sent
        network = ("--yolo", "--sandbox", "workspace-write", "--sandbox-network", "on")
        allowed = engine(*one_step_each(search), args=network)
        messages, _ = run_turn(allowed, answer=approve)
        assert requests(messages) == [] and not results(messages)["search"]["is_error"]
        assert platform.paths() == ["/search"]
