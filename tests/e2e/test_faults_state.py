"""A damaged `state.json` never grants anything: a value of the wrong type for a field that
switches on auto-approval (`yolo`, `afk`), plan mode, session approval rules or extra
workspace directories counts as off / empty, and the engine says so in one stderr line that
names the file and the field. Each case resumes a real session with `--session ID`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.tool_calls import call, requests, run_turn
from tests.wire_client import Sandbox, WireProcess, payloads

from soulwire.sessions.paths import session_dir

SESSION = "damaged-state"
# Every damaged value is checked against the one check (engine/state_check.py) in
# tests/unit/test_state_check.py; each case here resumes a real session, with values that would
# grant something were the check skipped (truthy, or a list holding a real rule or directory).
NOT_A_BOOLEAN = ["no", 1]


def write_state(sandbox: Sandbox, state: dict[str, Any]) -> Path:
    directory = session_dir(sandbox.share, sandbox.work, SESSION)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "state.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    return path


def state_with(field: str, value: Any) -> dict[str, Any]:
    approval: dict[str, Any] = {"yolo": False, "afk": False, "auto_approve_actions": []}
    state: dict[str, Any] = {"version": 1, "approval": approval, "plan_mode": False}
    if field.startswith("approval."):
        approval[field.removeprefix("approval.")] = value
    else:
        state[field] = value
    return state


def warnings(wire: WireProcess) -> list[str]:
    return [line for line in wire.stderr_lines if "state.json" in line]


def shell_asks_for_approval(
    engine: Any, sandbox: Sandbox, state: dict[str, Any]
) -> tuple[list[Any], WireProcess]:
    """Resume the session with `state` and let the model call Shell; the approval requests
    sent (each is rejected)."""
    marker = sandbox.root / "shell-ran"
    marker.unlink(missing_ok=True)
    write_state(sandbox, state)
    wire = engine(
        call("c1", "Shell", {"command": f"touch {marker}"}), "text: done", args=("--session", SESSION)
    )
    wire.initialize()
    messages, result = run_turn(
        wire, answer=lambda m: {"request_id": m["params"]["payload"]["id"], "response": "reject"}
    )
    assert result == {"status": "finished"}
    asked = requests(messages)
    assert marker.exists() == (not asked)  # asked means rejected: then the command never ran
    wire.close()
    return asked, wire


def assert_one_warning(wire: WireProcess, sandbox: Sandbox, field: str) -> None:
    [line] = warnings(wire)
    assert str(session_dir(sandbox.share, sandbox.work, SESSION) / "state.json") in line
    assert field in line
    assert "Traceback" not in "".join(wire.stderr_lines)


@pytest.mark.parametrize("value", NOT_A_BOOLEAN, ids=repr)
@pytest.mark.parametrize("field", ["approval.yolo", "approval.afk"])
def test_a_mistyped_yolo_or_afk_does_not_bypass_approval(engine, sandbox, field, value):
    asked, wire = shell_asks_for_approval(engine, sandbox, state_with(field, value))
    assert [r["action"] for r in asked] == ["run command"]
    assert_one_warning(wire, sandbox, field)


@pytest.mark.parametrize("value", ["run command", ["run command", 5]], ids=repr)
def test_session_rules_that_are_not_a_list_of_strings_count_as_none(engine, sandbox, value):
    asked, wire = shell_asks_for_approval(engine, sandbox, state_with("approval.auto_approve_actions", value))
    assert [r["action"] for r in asked] == ["run command"]
    assert_one_warning(wire, sandbox, "approval.auto_approve_actions")


@pytest.mark.parametrize("value", ["yes", [["yolo", True]]])
def test_a_mistyped_approval_table_counts_as_the_defaults(engine, sandbox, value):
    state = {"version": 1, "approval": value}
    asked, wire = shell_asks_for_approval(engine, sandbox, state)
    assert [r["action"] for r in asked] == ["run command"]
    assert_one_warning(wire, sandbox, "approval")


def test_well_typed_values_still_apply_and_several_bad_fields_make_one_line(engine, sandbox):
    # The control: a real `true` is honoured (so the tests above can fail).
    asked, wire = shell_asks_for_approval(engine, sandbox, state_with("approval.yolo", True))
    assert asked == [] and warnings(wire) == []

    state = state_with("approval.afk", "no")
    state["plan_mode"] = "no"
    state["additional_dirs"] = "/"
    asked, wire = shell_asks_for_approval(engine, sandbox, state)
    assert [r["action"] for r in asked] == ["run command"]
    [line] = warnings(wire)
    assert "approval.afk" in line and "plan_mode" in line and "additional_dirs" in line


@pytest.mark.parametrize("value", ["no", 1])
def test_a_mistyped_plan_mode_is_off(engine, sandbox, value):
    write_state(sandbox, state_with("plan_mode", value))
    wire = engine("text: hello", args=("--session", SESSION))
    wire.initialize(protocol_version="1.10", capabilities={"supports_plan_mode": True})
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    assert all(not status.get("plan_mode") for status in payloads(messages, "StatusUpdate"))
    wire.close()
    saved = json.loads((session_dir(sandbox.share, sandbox.work, SESSION) / "state.json").read_text())
    assert saved["plan_mode"] is False
    assert_one_warning(wire, sandbox, "plan_mode")


@pytest.mark.parametrize("value", ["/", ["/", 5]])
def test_mistyped_extra_directories_do_not_widen_the_workspace(engine, sandbox, value):
    outside = sandbox.root / "outside.txt"
    outside.write_text("secret-ish\n", encoding="utf-8")
    write_state(sandbox, state_with("additional_dirs", value))
    wire = engine(call("r1", "ReadFile", {"path": str(outside)}), "text: done", args=("--session", SESSION))
    wire.initialize()
    messages, _ = run_turn(
        wire, answer=lambda m: {"request_id": m["params"]["payload"]["id"], "response": "reject"}
    )
    assert [r["action"] for r in requests(messages)] == ["read file outside of working directory"]
    wire.close()
    assert_one_warning(wire, sandbox, "additional_dirs")


def test_an_intact_state_gives_no_warning(engine, sandbox):
    state = state_with("approval.auto_approve_actions", ["run command"])
    state["additional_dirs"] = [str(sandbox.root)]
    state["todos"] = [{"title": "x", "status": "pending"}]
    asked, wire = shell_asks_for_approval(engine, sandbox, state)
    assert asked == []  # the rule applies
    assert warnings(wire) == []
