"""Background tasks in the real engine: `Shell` with run_in_background, `TaskList`,
`TaskOutput`, `TaskStop`, the end notice reaching the model, and no process outliving the
engine (spec §5.1, §7.1, §9)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.test_shell_tool import processes_running, unique_sleep, wait_until_gone
from tests.tool_calls import approve, call, one_step_each, requests, results, run_turn
from tests.waiting import engine_watchdogs, wait_until_exited
from tests.wire_client import Sandbox, WireProcess, event_types, payloads

# A task that runs until the test lets it finish: deterministic, no timing involved.
WAIT_FOR_RELEASE = "while [ ! -e release ]; do sleep 0.02; done"
WAITER = f"echo started; {WAIT_FOR_RELEASE}; echo finished"


def echo_model(sandbox: Sandbox) -> None:
    """`_echo`: every prompt is the script of one step (the ids of tasks are not known in
    advance). One step per turn, or the same script would run again."""
    sandbox.config_extra = {
        "default_model": "echo",
        "models": {"echo": {"provider": "echo_provider", "model": "echo", "max_context_size": 100000}},
        "providers": {"echo_provider": {"type": "_echo", "base_url": "", "api_key": ""}},
        "loop_control": {"max_steps_per_turn": 1},
    }


def step(
    wire: WireProcess, *calls: str, answer: Any = approve
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One turn whose single step makes `calls`; returns (messages, results by call id)."""
    messages, result = run_turn(wire, "\n".join(calls), answer=answer)
    assert result == {"status": "max_steps_reached", "steps": 1}
    return messages, results(messages)


def field_lines(output: str) -> dict[str, str]:
    """The `key: value` lines of a task tool's output (first occurrence wins)."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key not in found:
            found[key] = value
    return found


def wait_until_running(marker: str, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not processes_running(marker):
        assert time.monotonic() < deadline, f"no process running {marker}"
        time.sleep(0.02)


def session_dir(sandbox: Sandbox) -> Path:
    (found,) = list((sandbox.share / "sessions").glob("*/*/"))
    return found


def test_start_list_output_and_stop(engine, sandbox):
    echo_model(sandbox)
    duration = unique_sleep()
    wire = engine()
    wire.initialize(protocol_version="1.10")

    messages, values = step(
        wire, call("a", "Shell", {"command": WAITER, "run_in_background": True, "description": "waiter"})
    )
    (request,) = requests(messages)
    assert request["sender"] == "Shell" and request["action"] == "run background command"
    assert request["description"] == f"Run background command `{WAITER}`"
    assert request["display"] == [{"type": "shell", "language": "bash", "command": WAITER}]
    started = values["a"]
    assert not started["is_error"] and started["message"] == "Background task started."
    waiter = field_lines(started["output"])["task_id"]
    assert waiter.startswith("bash-")
    assert started["display"] == [
        {"type": "brief", "text": f"Started {waiter}"},
        {
            "type": "background_task",
            "task_id": waiter,
            "kind": "bash",
            "status": "running",
            "description": "waiter",
        },
    ]
    task_dir = session_dir(sandbox) / "tasks" / waiter
    assert json.loads((task_dir / "spec.json").read_text())["command"] == WAITER

    _, values = step(
        wire,
        call(
            "b",
            "Shell",
            {
                "command": f"sleep {duration} & sleep {duration}; wait",
                "run_in_background": True,
                "description": "sleeper",
            },
        ),
    )
    sleeper = field_lines(values["b"]["output"])["task_id"]
    wait_until_running(duration)

    _, values = step(wire, call("l", "TaskList", {}), call("o", "TaskOutput", {"task_id": waiter}))
    listing = values["l"]
    assert listing["message"] == "Task list retrieved."
    assert listing["output"].startswith("active_background_tasks: 2\n\n[1]\ntask_id: ")
    assert [b["task_id"] for b in listing["display"]] == [waiter, sleeper]
    snapshot = field_lines(values["o"]["output"])
    assert snapshot["retrieval_status"] == "not_ready" and snapshot["status"] == "running"
    assert values["o"]["message"] == "Task snapshot retrieved."

    # Stop the sleeper (approval), let the waiter end, and wait for both in one step.
    (sandbox.work / "release").touch()
    messages, values = step(
        wire,
        call("s", "TaskStop", {"task_id": sleeper}),
        call("w1", "TaskOutput", {"task_id": sleeper, "block": True, "timeout": 30}),
        call("w2", "TaskOutput", {"task_id": waiter, "block": True, "timeout": 30}),
        call("x", "TaskOutput", {"task_id": "bash-nothere"}),
    )
    (request,) = requests(messages)
    assert request["sender"] == "TaskStop" and request["action"] == "stop background task"
    assert request["description"] == f"Stop background task `{sleeper}`"
    assert request["display"][0]["type"] == "background_task" and request["display"][0]["task_id"] == sleeper
    assert values["s"]["message"] == "Task stop requested."
    stopped = field_lines(values["w1"]["output"])
    assert stopped["status"] == "killed" and stopped["interrupted"] == "true"
    assert stopped["reason"] == "Stopped by TaskStop"
    assert wait_until_gone(duration) == []
    done = values["w2"]
    assert field_lines(done["output"])["retrieval_status"] == "success"
    assert field_lines(done["output"])["exit_code"] == "0"
    assert done["output"].endswith("[output]\nstarted\nfinished")
    assert done["display"][0]["status"] == "completed"
    assert values["x"]["is_error"] and values["x"]["message"] == "Task not found: bash-nothere"
    assert values["x"]["display"] == [{"type": "brief", "text": "Task not found"}]
    assert json.loads((task_dir / "runtime.json").read_text())["status"] == "completed"
    assert (task_dir / "output.log").read_text() == "started\nfinished\n"


def test_the_model_is_told_when_a_task_ends(engine, sandbox):
    for version, notified in (("1.10", True), ("1.3", False)):
        sandbox.root = sandbox.root / version
        runtime_files = f"{sandbox.share}/sessions/*/*/tasks/*/runtime.json"
        wire = engine(
            call(
                "bg",
                "Shell",
                {
                    "command": f"{WAIT_FOR_RELEASE}; echo tail-line",
                    "run_in_background": True,
                    "description": "quick",
                },
            ),
            call(
                "wait",
                "Shell",
                {"command": f"touch release; until grep -q completed {runtime_files}; do sleep 0.02; done"},
            ),
            "text: done",
            args=("--yolo",),
        )
        wire.initialize(protocol_version=version)
        messages, result = run_turn(wire, answer=None)
        assert result == {"status": "finished"}
        task_id = field_lines(results(messages)["bg"]["output"])["task_id"]
        notices = payloads(messages, "Notification")
        if notified:
            (notice,) = notices
            assert notice["type"] == "task.completed" and notice["source_id"] == task_id
            assert notice["title"] == "Background task completed: quick" and notice["severity"] == "success"
            # The task ends during step 2 (which releases it): the notice comes with step 3.
            types = event_types(messages)
            assert types.index("Notification") > [i for i, t in enumerate(types) if t == "StepBegin"][2]
        else:
            assert notices == []
        records = [
            json.loads(line) for line in (session_dir(sandbox) / "context.jsonl").read_text().splitlines()
        ]
        roles = [r.get("role") for r in records if not r.get("role", "_").startswith("_")]
        notice_text = next(r["content"] for r in records if "<notification" in str(r.get("content")))
        assert f'source_id="{task_id}"' in notice_text
        assert "Output tail:\ntail-line\n</task-notification>" in notice_text
        # user prompt, two (assistant, tool) pairs, the notice, the final answer
        assert roles == ["user", "assistant", "tool", "assistant", "tool", "user", "assistant"]
        wire.close()


def test_tasks_survive_cancel_and_die_with_the_engine(engine, sandbox):
    duration, foreground = unique_sleep(), unique_sleep()
    wire = engine(
        call("bg", "Shell", {"command": f"sleep {duration}", "run_in_background": True, "description": "bg"}),
        "text: started",
        call("fg", "Shell", {"command": f"sleep {foreground}"}),
        args=("--yolo",),
    )
    wire.initialize()
    run_turn(wire, answer=None)
    wait_until_running(duration)
    rid = wire.request("prompt", {"user_input": "foreground"})
    wait_until_running(foreground)
    wire.request("cancel")
    _, response = wire.until_response(rid)
    assert response["result"] == {"status": "cancelled"}
    assert wait_until_gone(foreground) == []
    assert processes_running(duration), "cancelling a turn must not stop background tasks"
    assert wire.close() == 0
    assert wait_until_gone(duration) == []
    (runtime,) = (session_dir(sandbox) / "tasks").glob("*/runtime.json")
    assert json.loads(runtime.read_text())["status"] == "killed"


@pytest.mark.parametrize("end", ["eof", "sigkill"])
def test_keep_alive_on_exit_leaves_a_command_running_after_the_engine(engine, sandbox, end):
    """`[background] keep_alive_on_exit = true` (a reference key): the session's end leaves
    its background commands running, the record says so, and the engine's watchdog (which
    kills what tools left behind, also when the engine is SIGKILLed) lets them be."""
    duration = unique_sleep()
    sandbox.config_extra = {"background": {"keep_alive_on_exit": True}}
    wire = engine(
        call(
            "bg", "Shell", {"command": f"sleep {duration}", "run_in_background": True, "description": "kept"}
        ),
        "text: started",
        args=("--yolo",),
    )
    wire.initialize()
    run_turn(wire, answer=None)
    wait_until_running(duration)
    watchdogs = engine_watchdogs(wire.proc.pid)  # the one thing that kills after the engine's end
    if end == "eof":
        assert wire.close() == 0
    else:
        wire.proc.kill()
        wire.proc.wait()
    try:
        wait_until_exited(watchdogs, what="the engine's watchdog")  # (none: nothing was tied)
        assert processes_running(duration), "keep_alive_on_exit: the command must outlive the engine"
        (runtime,) = (session_dir(sandbox) / "tasks").glob("*/runtime.json")
        record = json.loads(runtime.read_text())
        assert record["status"] == "running"
        if end == "eof":  # (a SIGKILLed engine writes nothing more)
            assert record["left_running_at"] > record["created_at"]
    finally:
        for pid in processes_running(duration):
            os.kill(pid, signal.SIGKILL)
    assert wait_until_gone(duration) == []


def test_a_task_past_its_timeout_is_killed_and_reported(engine, sandbox):
    duration = unique_sleep()
    runtime_files = f"{sandbox.share}/sessions/*/*/tasks/*/runtime.json"
    wire = engine(
        call(
            "bg",
            "Shell",
            {
                "command": f"sleep {duration} & sleep {duration}",
                "run_in_background": True,
                "description": "slow",
                "timeout": 1,
            },
        ),
        call("wait", "Shell", {"command": f"until grep -q failed {runtime_files}; do sleep 0.02; done"}),
        "text: done",
        args=("--yolo",),
    )
    wire.initialize(protocol_version="1.10")
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    assert wait_until_gone(duration) == []  # the whole group, not only the leader
    (notice,) = payloads(messages, "Notification")
    assert notice["type"] == "task.timed_out" and notice["title"] == "Background task timed out: slow"
    assert notice["payload"]["timed_out"] is True and notice["payload"]["status"] == "failed"
    assert notice["payload"]["failure_reason"] == "Command timed out after 1s"


def test_argument_rules_and_plan_mode(engine):
    wire = engine(
        *one_step_each(
            ("nodesc", "Shell", {"command": "true", "run_in_background": True}),
            ("blank", "Shell", {"command": "true", "run_in_background": True, "description": " "}),
            ("long", "Shell", {"command": "true", "timeout": 301}),
            (
                "toolong",
                "Shell",
                {"command": "true", "run_in_background": True, "description": "x", "timeout": 86401},
            ),
            ("stop", "TaskStop", {"task_id": "bash-whatever"}),
            ("list", "TaskList", {"limit": 0}),
        ),
        args=("--plan",),
    )
    wire.initialize(protocol_version="1.10")
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    assert requests(messages) == []
    values = results(messages)
    for key in ("nodesc", "blank"):
        assert values[key]["message"] == (
            "Error validating JSON arguments: description is required when run_in_background is true"
        )
    for key in ("long", "toolong", "list"):
        assert values[key]["message"].startswith("Error validating JSON arguments: ")
    assert "foreground" in values["long"]["message"]
    assert values["stop"]["is_error"] and values["stop"]["display"] == [
        {"type": "brief", "text": "Blocked in plan mode"}
    ]
