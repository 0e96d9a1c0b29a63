"""Plan mode over the real engine: `set_plan_mode`, `/plan`, `--plan`, `default_plan_mode`,
`StatusUpdate.plan_mode`, persistence across a resume, writes limited to the plan file, and
the EnterPlanMode / ExitPlanMode tools with their questions (approve, revise, reject)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.tool_calls import call, results
from tests.wire_client import Sandbox, event_types, payloads

SESSION = "plan-session"
CAPABLE = {
    "protocol_version": "1.10",
    "capabilities": {"supports_plan_mode": True, "supports_question": True},
}
PLAN_ONLY_STATUS = {
    "context_usage": None, "context_tokens": None, "max_context_tokens": None, "token_usage": None,
    "message_id": None, "plan_mode": True, "mcp_status": None,
}  # fmt: skip


def plan_file(sandbox: Sandbox, session: str = SESSION) -> Path:
    return sandbox.share / "plans" / f"{session}.md"


def state(sandbox: Sandbox, session: str = SESSION) -> dict[str, Any]:
    [path] = sandbox.share.glob(f"sessions/*/{session}/state.json")
    return json.loads(path.read_text())


def session_file(sandbox: Sandbox, name: str, session: str = SESSION) -> list[dict[str, Any]]:
    [path] = sandbox.share.glob(f"sessions/*/{session}/{name}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def answer_questions(*labels: str) -> Any:
    """Answer the QuestionRequests in order with `labels` (one answer each)."""
    pending = list(labels)

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        payload = message["params"]["payload"]
        assert message["params"]["type"] == "QuestionRequest" and message["id"] == payload["id"]
        return {"request_id": payload["id"], "answers": {payload["questions"][0]["question"]: pending.pop(0)}}

    return answer


def test_set_plan_mode_is_reported_recorded_persisted_and_survives_resume(engine, sandbox):
    wire = engine("text: planning", "text: still planning", args=("--session", SESSION))
    wire.initialize(**CAPABLE)
    events, response = wire.until_response(wire.request("set_plan_mode", {"enabled": True}))
    assert payloads(events, "StatusUpdate") == [PLAN_ONLY_STATUS]
    assert response["result"] == {"status": "ok", "plan_mode": True}
    for params in (None, {}, {"enabled": "yes"}):
        _, bad = wire.until_response(wire.request("set_plan_mode", params))
        assert bad["error"]["code"] == -32602
        assert bad["error"]["message"].startswith("Invalid parameters for method `set_plan_mode`: enabled")
        assert bad["error"]["data"] == {"field": "enabled"}
    saved = state(sandbox)
    assert (
        saved["plan_mode"] is True and saved["plan_slug"] == SESSION and saved["plan_session_id"] == SESSION
    )
    assert {"type": "StatusUpdate", "payload": PLAN_ONLY_STATUS} in [
        r["message"] for r in session_file(sandbox, "wire.jsonl")[1:]
    ]
    events, _ = wire.prompt("plan something")
    assert payloads(events, "StatusUpdate")[0]["plan_mode"] is True
    assert wire.close() == 0

    wire = engine(args=("--session", SESSION))  # the same scripts file: the next script is read anew
    wire.initialize(**CAPABLE)
    events, _ = wire.prompt("go on")
    assert payloads(events, "StatusUpdate")[0]["plan_mode"] is True  # restored from state.json
    _, response = wire.until_response(wire.request("set_plan_mode", {"enabled": False}))
    assert response["result"] == {"status": "ok", "plan_mode": False}
    wire.close()
    assert state(sandbox)["plan_mode"] is False
    reminders = [r["content"] for r in session_file(sandbox, "context.jsonl") if r["role"] == "user"]
    assert sum("<system-reminder>Plan mode is on." in str(c) for c in reminders) == 2  # once per turn
    assert str(plan_file(sandbox)) in str(reminders)


def test_writes_go_only_to_the_plan_file_and_need_no_approval(engine, sandbox):
    target, plan = sandbox.work / "app.py", plan_file(sandbox)
    wire = engine(
        call("w1", "WriteFile", {"path": str(target), "content": "x = 1\n"}),
        call("w2", "WriteFile", {"path": str(plan), "content": "# Plan\n1. add x\n"}),
        call("w3", "StrReplaceFile", {"path": str(plan), "edit": {"old": "add x", "new": "add x = 1"}}),
        call("r1", "ReadFile", {"path": str(plan)}),
        "text: planned",
        args=("--session", SESSION, "--plan"),
    )
    wire.initialize(**CAPABLE)
    events, response = wire.prompt("plan it")  # no yolo: any approval request would be unanswered
    assert response["result"] == {"status": "finished"}
    assert not [m for m in events if m.get("method") == "request"]
    values = results(events)
    assert values["w1"]["is_error"] and values["w1"]["message"].startswith("Plan mode is on:")
    assert values["w1"]["display"] == [{"type": "brief", "text": "Blocked in plan mode"}]
    assert not target.exists()
    assert not values["w2"]["is_error"] and not values["w3"]["is_error"]
    assert plan.read_text() == "# Plan\n1. add x = 1\n"
    assert "add x = 1" in values["r1"]["output"]
    events, _ = wire.prompt("/plan view")
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "# Plan\n1. add x = 1\n"}]


def test_plan_slash_command(engine, sandbox):
    wire = engine(args=("--session", SESSION))
    wire.initialize(protocol_version="1.10")
    events, response = wire.prompt("/plan")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == ["TurnBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    assert str(plan_file(sandbox)) in payloads(events, "ContentPart")[0]["text"]
    assert payloads(events, "StatusUpdate") == [PLAN_ONLY_STATUS]
    events, _ = wire.prompt("/plan view")
    assert payloads(events, "ContentPart")[0]["text"].startswith("No plan has been written yet")
    plan_file(sandbox).write_text("the plan")
    events, _ = wire.prompt("/plan clear")
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "The plan has been cleared."}]
    assert not plan_file(sandbox).exists()
    events, _ = wire.prompt("/plan off")
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "Plan mode is off."}]
    assert payloads(events, "StatusUpdate")[0]["plan_mode"] is False
    events, _ = wire.prompt("/plan sideways")
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "Usage: /plan [on|off|view|clear]"}]


def test_default_plan_mode_applies_to_new_sessions_only(engine, sandbox):
    sandbox.config_extra = {"default_plan_mode": True}
    wire = engine("text: a", "text: b", args=("--session", SESSION))
    wire.initialize(protocol_version="1.10")
    events, _ = wire.prompt("hi")
    assert payloads(events, "StatusUpdate")[0]["plan_mode"] is True
    wire.until_response(wire.request("set_plan_mode", {"enabled": False}))
    wire.close()
    wire = engine(args=("--session", SESSION))
    wire.initialize(protocol_version="1.10")
    events, _ = wire.prompt("again")
    assert payloads(events, "StatusUpdate")[0]["plan_mode"] is False  # the session's own choice


def test_enter_plan_mode_asks_and_exit_plan_mode_reviews_the_plan(engine, sandbox):
    plan = plan_file(sandbox)
    wire = engine(
        call("e1", "EnterPlanMode", {}),
        call("w1", "WriteFile", {"path": str(plan), "content": "1. do it\n"}),
        call("x1", "ExitPlanMode", {}),
        call(
            "x2", "ExitPlanMode", {"options": [{"label": "Fast", "description": "quick"}, {"label": "Safe"}]}
        ),
        "text: carrying out the plan",
        args=("--session", SESSION),
    )
    wire.initialize(**CAPABLE)
    events, response = wire.prompt("big change", answer=answer_questions("Yes", "add tests first", "Safe"))
    assert response["result"] == {"status": "finished"}
    asked = [m["params"]["payload"] for m in events if m.get("method") == "request"]
    assert [q["questions"][0]["question"] for q in asked] == [
        "Enter plan mode?", "Approve this plan?", "Approve this plan?",
    ]  # fmt: skip
    assert [o["label"] for o in asked[0]["questions"][0]["options"]] == ["Yes", "No"]
    review = asked[1]["questions"][0]
    assert [o["label"] for o in review["options"]] == ["Approve", "Reject", "Reject and Exit"]
    assert review["other_label"] == "Revise"
    assert [o["label"] for o in asked[2]["questions"][0]["options"]] == [
        "Fast",
        "Safe",
        "Reject",
        "Reject and Exit",
    ]
    assert all(q["tool_call_id"] in ("e1", "x1", "x2") for q in asked)
    displays = payloads(events, "PlanDisplay")
    assert displays == [{"content": "1. do it\n", "file_path": str(plan)}] * 2
    kinds = event_types(events)
    assert kinds.index("PlanDisplay") < kinds.index("request:QuestionRequest", kinds.index("PlanDisplay"))
    values = results(events)
    assert "Plan mode is on" in values["e1"]["output"] and not values["w1"]["is_error"]
    assert "add tests first" in values["x1"]["output"] and not values["x1"]["is_error"]
    assert "approved" in values["x2"]["output"] and "Safe" in values["x2"]["output"]
    plan_modes = [s["plan_mode"] for s in payloads(events, "StatusUpdate")]
    assert plan_modes == [False, True, True, True, True, False, False]  # after e1 and x2: plan_mode only
    assert state(sandbox)["plan_mode"] is False


def test_rejecting_the_plan_stops_the_turn(engine, sandbox):
    plan = plan_file(sandbox)
    plan.parent.mkdir(parents=True)
    plan.write_text("1. risky\n")
    wire = engine(
        call("x1", "ExitPlanMode", {}), "text: unused", call("x2", "ExitPlanMode", {}), "text: unused either",
        args=("--session", SESSION, "--plan"),
    )  # fmt: skip
    wire.initialize(**CAPABLE)
    events, _ = wire.prompt("review", answer=answer_questions("Reject"))
    assert event_types(events).count("StepBegin") == 1
    assert results(events)["x1"]["display"] == [{"type": "brief", "text": "Plan rejected"}]
    events, _ = wire.prompt("/plan view")  # still in plan mode
    assert payloads(events, "ContentPart")[0]["text"] == "1. risky\n"
    events, _ = wire.prompt("next")  # consumes "text: unused"
    events, _ = wire.prompt("review again", answer=answer_questions("Reject and Exit"))
    assert event_types(events).count("StepBegin") == 1
    assert payloads(events, "StatusUpdate")[-1]["plan_mode"] is False


def test_plan_tools_are_hidden_from_clients_without_the_capability(engine):
    wire = engine(call("e1", "EnterPlanMode", {}), "text: ok")
    wire.initialize(protocol_version="1.10", capabilities={"supports_question": True})
    events, _ = wire.prompt("plan")
    assert results(events)["e1"]["message"] == "Tool `EnterPlanMode` not found"


def test_yolo_enters_and_afk_approves_without_asking(engine, sandbox):
    plan = plan_file(sandbox)
    wire = engine(
        call("e1", "EnterPlanMode", {}),
        call("w1", "WriteFile", {"path": str(plan), "content": "1. go\n"}),
        call("x1", "ExitPlanMode", {}),
        "text: done",
        args=("--session", SESSION, "--afk"),
    )
    wire.initialize(**CAPABLE)
    events, _ = wire.prompt("go")
    assert not [m for m in events if m.get("method") == "request"]
    assert "approved automatically" in results(events)["x1"]["output"]
    assert payloads(events, "PlanDisplay") == [{"content": "1. go\n", "file_path": str(plan)}]
