"""Event-type discipline: a client that declares no newer protocol version or capability never
receives a type it cannot know (the Go SDK stops reading at the first unknown type), even when
the session uses every newer feature: retries, steering, hooks, plan mode and questions."""

from __future__ import annotations

import json

from tests.tool_calls import call, results
from tests.wire_client import event_types

TYPES_1_3 = {
    "TurnBegin", "TurnEnd", "StepBegin", "StepInterrupted", "CompactionBegin", "CompactionEnd", "StatusUpdate",
    "ContentPart", "ToolCall", "ToolCallPart", "ToolResult", "SubagentEvent", "ApprovalResponse",
    "request:ApprovalRequest", "request:ToolCallRequest",
}  # fmt: skip
NEWER = {"StepRetry", "SteerInput", "HookTriggered", "HookResolved", "PlanDisplay", "request:QuestionRequest"}
STEERED = {"SteerInput"}  # it answers a `steer`: a client that steers knows it


def test_a_client_that_declares_nothing_gets_only_1_3_types(engine, sandbox):
    gate = sandbox.work / "go"
    plan = sandbox.share / "plans" / "gated.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("1. do it\n")
    sandbox.config_extra = {"hooks": [{"event": "PreToolUse", "command": "exit 0"}]}
    question = {"questions": [{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]}
    wire = engine(
        "error: 500 boom",
        call("s1", "Shell", {"command": f"while [ ! -f {gate} ]; do sleep 0.02; done"}),
        call("x1", "ExitPlanMode", {}) + "\n" + call("q1", "AskUserQuestion", question),
        args=("--yolo", "--plan", "--session", "gated"),
    )
    prompt = wire.request("prompt", {"user_input": "go"})  # no initialize at all
    seen = []
    while (message := wire.recv()) is not None and message.get("id") != prompt:
        seen.append(message)
        if (message.get("params") or {}).get("type") == "ToolCall" and not gate.exists():
            between, steered = wire.until_response(wire.request("steer", {"user_input": "psst"}))
            assert steered["result"] == {"status": "steered"}
            seen.extend(between)
            gate.touch()
    assert message is not None and message["result"] == {"status": "finished"}
    assert set(event_types(seen)) <= TYPES_1_3 | STEERED and "SteerInput" in event_types(seen)
    values = results(seen)
    assert values["x1"]["is_error"] and values["q1"]["is_error"]  # nobody could be asked
    again, replayed = wire.until_response(wire.request("replay"))
    assert replayed["result"]["events"] > 0 and set(event_types(again)) <= TYPES_1_3 | STEERED
    wire.close()
    [record_file] = sandbox.share.glob("sessions/*/gated/wire.jsonl")
    recorded = {json.loads(line)["message"]["type"] for line in record_file.read_text().splitlines()[1:]}
    assert {"StepRetry", "SteerInput", "HookTriggered", "HookResolved", "PlanDisplay"} <= recorded


def test_replay_to_a_1_3_client_skips_newer_types(engine, sandbox):
    sandbox.config_extra = {"hooks": [{"event": "Stop", "command": "exit 0"}]}
    wire = engine("error: 500 boom", "text: fine", args=("--session", "replayed"))
    wire.initialize(protocol_version="1.10", client={"name": "modern"})
    events, _ = wire.prompt("go")
    assert {"StepRetry", "HookTriggered", "HookResolved"} <= set(event_types(events))
    wire.close()
    wire = engine(args=("--session", "replayed"))
    wire.initialize(protocol_version="1.3")
    replayed, response = wire.until_response(wire.request("replay"))
    assert response["result"]["status"] == "finished"
    kinds = event_types(replayed)
    assert set(kinds) <= TYPES_1_3 and "ContentPart" in kinds and not set(kinds) & NEWER


def test_the_go_sdk_handshake_gets_only_1_3_types(engine, sandbox):
    """The Go SDK copies our version from `info --json` and sends neither `client` nor
    `capabilities`; it stops reading at an unknown type, so it must be served as 1.3."""
    sandbox.config_extra = {"hooks": [{"event": "Stop", "command": "exit 0"}]}
    wire = engine("error: 500 boom", "text: fine", "error: 503 busy", "text: again")
    from soulwire.wire import PROTOCOL_VERSION

    _, reply = wire.until_response(
        wire.request("initialize", {"protocol_version": PROTOCOL_VERSION, "external_tools": []})
    )
    assert reply["result"]["protocol_version"] == PROTOCOL_VERSION
    events, response = wire.prompt("go")
    assert response["result"]["status"] == "finished"
    assert set(event_types(events)) <= TYPES_1_3
    # The same version with a client name is a client that knows what it declared.
    wire.initialize(protocol_version=PROTOCOL_VERSION, client={"name": "modern", "version": "1"})
    events, _ = wire.prompt("again")
    assert {"StepRetry", "HookTriggered", "HookResolved"} <= set(event_types(events))
