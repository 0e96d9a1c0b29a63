"""The Agent tool in the real engine: a sub-agent's events wrapped in SubagentEvent, its
approvals tagged with its id and type, its files under `subagents/<agent_id>/`, resume,
cancellation, failures, and the shape an old (1.3) client gets."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from tests.e2e.test_shell_tool import processes_running, unique_sleep
from tests.tool_calls import answering, approve, call, requests, results, run_turn
from tests.wire_client import Sandbox, WireProcess, event_types, payloads

from soulwire.sessions.paths import session_dir

LONG_ANSWER = ("The work dir holds hello.txt and nothing else; " * 6).strip()  # > 200 chars: no follow-up
MORE_SUMMARY = "Your previous response was too brief."
SESSION = ("--session", "s-1")


def agent_call(call_id: str, prompt: str, **extra: Any) -> str:
    return call(call_id, "Agent", {"description": "look around", "prompt": prompt, **extra})


def wrapped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return payloads(messages, "SubagentEvent")


def inner_types(messages: list[dict[str, Any]]) -> list[str]:
    return [p["event"]["type"] for p in wrapped(messages)]


def subagent_dir(sandbox: Sandbox, agent_id: str) -> Path:
    return session_dir(sandbox.share, sandbox.work, "s-1") / "subagents" / agent_id


def agent_id_of(output: str) -> str:
    match = re.match(r"agent_id: (\S+)\n", output)
    assert match, output
    return match.group(1)


def start(engine: Any, *scripts: str, args: tuple[str, ...] = (), version: str = "1.10") -> WireProcess:
    wire = engine(*scripts, args=(*SESSION, *args))
    wire.initialize(protocol_version=version)
    return wire


def test_coder_subagent_events_approval_output_and_files(engine, sandbox):
    wire = start(
        engine,
        agent_call("a1", "Run echo sub and report"),
        call("s1", "Shell", {"command": "echo sub"}),
        f"text: {LONG_ANSWER}",
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"}
    types = event_types(messages)
    assert types[:4] == ["TurnBegin", "StepBegin", "ToolCall", "StatusUpdate"]
    assert types[-5:] == ["ToolResult", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    # Between the parent's ToolCall and ToolResult: only wrapped events and the approval exchange.
    middle = types[4 : types.index("ToolResult")]
    assert set(middle) == {"SubagentEvent", "request:ApprovalRequest", "ApprovalResponse"}
    assert inner_types(messages) == [
        "TurnBegin",
        "StepBegin",
        "ToolCall",
        "StatusUpdate",
        "ToolResult",
        "StepBegin",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    output = results(messages)["a1"]["output"]
    agent_id = agent_id_of(output)
    assert re.fullmatch(r"a[0-9a-f]{8}", agent_id)
    for payload in wrapped(messages):
        assert (payload["parent_tool_call_id"], payload["agent_id"], payload["subagent_type"]) == (
            "a1",
            agent_id,
            "coder",
        )
    inner = [p["event"] for p in wrapped(messages)]
    assert inner[0]["payload"] == {"user_input": "Run echo sub and report"}
    assert inner[4]["payload"]["return_value"]["output"] == "sub\n"
    [request] = requests(messages)
    assert request["sender"] == "Shell" and request["tool_call_id"] == "s1"
    assert (request["agent_id"], request["subagent_type"]) == (agent_id, "coder")
    assert output == (
        f"agent_id: {agent_id}\nresumed: false\nactual_subagent_type: coder\nstatus: completed\n\n"
        f"[summary]\n{LONG_ANSWER}"
    )
    assert results(messages)["a1"]["is_error"] is False
    assert wire.close() == 0

    folder = subagent_dir(sandbox, agent_id)
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["agent_id"], meta["subagent_type"], meta["description"]) == (
        agent_id,
        "coder",
        "look around",
    )
    assert (folder / "prompt.txt").read_text() == "Run echo sub and report"
    assert LONG_ANSWER in (folder / "output").read_text()
    context = [json.loads(line) for line in (folder / "context.jsonl").read_text().splitlines()]
    assert [r["role"] for r in context if not r["role"].startswith("_")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    records = [json.loads(line) for line in (folder / "wire.jsonl").read_text().splitlines()]
    assert records[0]["type"] == "metadata"
    assert [r["message"]["type"] for r in records[1:]] == inner_types(messages)
    # The parent's record keeps the wrapped events, as the client saw them.
    parent = session_dir(sandbox.share, sandbox.work, "s-1") / "wire.jsonl"
    assert sum('"SubagentEvent"' in line for line in parent.read_text().splitlines()) == len(inner)


def test_explore_cannot_write_and_a_brief_answer_is_asked_to_say_more(engine, sandbox):
    wire = start(
        engine,
        agent_call("a1", "find things", subagent_type="explore"),
        call("s1", "WriteFile", {"path": "made.txt", "content": "x"}),
        "text: short",
        f"text: {LONG_ANSWER}",
        "text: parent done",
        args=("--yolo",),
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    inner = [p["event"] for p in wrapped(messages)]
    [tool_result] = [e["payload"] for e in inner if e["type"] == "ToolResult"]
    assert tool_result["return_value"]["is_error"]
    assert tool_result["return_value"]["message"] == "Tool `WriteFile` not found"
    assert not (sandbox.work / "made.txt").exists()
    turns = [e["payload"]["user_input"] for e in inner if e["type"] == "TurnBegin"]
    assert turns[0] == "find things" and turns[1].startswith(MORE_SUMMARY)
    assert {p["subagent_type"] for p in wrapped(messages)} == {"explore"}
    output = results(messages)["a1"]["output"]
    assert "actual_subagent_type: explore\n" in output
    assert output.endswith(f"[summary]\n{LONG_ANSWER}")


def test_resume_continues_the_same_subagent_in_a_later_process(engine, sandbox):
    wire = start(
        engine,
        agent_call("a1", "first task", subagent_type="explore"),
        f"text: {LONG_ANSWER}",
        "text: parent done",
    )
    messages, _ = run_turn(wire, answer=None)
    agent_id = agent_id_of(results(messages)["a1"]["output"])
    assert wire.close() == 0

    wire = start(
        engine,
        agent_call("a2", "second task", resume=agent_id),
        f"text: again {LONG_ANSWER}",
        agent_call("a3", "third", resume="a00000000"),
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    assert values["a2"]["output"].startswith(
        f"agent_id: {agent_id}\nresumed: true\nactual_subagent_type: explore\nstatus: completed\n"
    )
    assert values["a3"]["is_error"] and "`a00000000` not found" in values["a3"]["message"]
    assert wire.close() == 0
    context = (subagent_dir(sandbox, agent_id) / "context.jsonl").read_text()
    assert "first task" in context and "second task" in context and f"again {LONG_ANSWER}" in context


def test_a_failing_subagent_is_an_error_result_and_the_parent_goes_on(engine):
    wire = start(
        engine,
        agent_call("a1", "fail please"),
        "error: 400 broken request",
        agent_call("a2", "wrong type", subagent_type="painter"),
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    assert values["a1"]["is_error"] and "broken request" in values["a1"]["message"]
    assert inner_types(messages)[-2:] == ["StepInterrupted", "TurnEnd"]
    assert values["a2"]["is_error"] and "Unknown subagent_type `painter`" in values["a2"]["message"]
    assert payloads(messages, "ContentPart")[-1]["text"] == "parent done"


def test_cancel_during_a_subagent_ends_both_turns(engine):
    marker = unique_sleep()
    wire = start(
        engine,
        agent_call("a1", "sleep"),
        call("s1", "Shell", {"command": f"sleep {marker}"}),
        "text: after cancel",
        args=("--yolo",),
    )
    rid = wire.request("prompt", {"user_input": "go"})
    seen: list[dict[str, Any]] = []
    while not any(e["type"] == "ToolCall" for e in (p["event"] for p in wrapped(seen))):
        message = wire.recv()
        assert message is not None
        seen.append(message)
    deadline = time.monotonic() + 30
    while not processes_running(marker):  # the command has started
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    wire.request("cancel")
    rest, response = wire.until_response(rid)  # in 15 s: not the command's 600 s
    assert response["result"] == {"status": "cancelled"}
    messages = seen + rest
    # Both calls cut short get a result that says so: the sub-agent's Shell, then the Agent.
    why = "interrupted: the turn was cancelled before this call finished"
    assert [r["return_value"]["message"] for r in payloads(messages, "ToolResult")] == [why]
    inner = [p["event"] for p in wrapped(messages)]
    assert [e["payload"]["return_value"]["message"] for e in inner if e["type"] == "ToolResult"] == [why]
    assert inner_types(messages)[-1] == "TurnEnd"
    assert event_types(messages)[-1] == "TurnEnd"
    messages, result = run_turn(wire, "again", answer=None)
    assert result == {"status": "finished"}
    assert payloads(messages, "ContentPart")[-1]["text"] == "after cancel"


def test_an_old_client_gets_task_tool_call_id(engine):
    wire = start(
        engine,
        agent_call("a1", "hello"),
        f"text: {LONG_ANSWER}",
        "text: parent done",
        version="1.3",
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    events = wrapped(messages)
    assert events and all(set(p) == {"task_tool_call_id", "event"} for p in events)
    assert {p["task_tool_call_id"] for p in events} == {"a1"}
    assert events[0]["event"]["type"] == "TurnBegin"
    assert wire.close() == 0

    # A replay gives each client the shape its live stream has.
    for version, fields in (("1.3", {"task_tool_call_id", "event"}), ("1.10", {"parent_tool_call_id"})):
        again = start(engine, version=version)
        replayed, response = again.until_response(again.request("replay"))
        assert response["result"]["status"] == "finished"
        sub = [m["params"]["payload"] for m in replayed if m.get("params", {}).get("type") == "SubagentEvent"]
        assert len(sub) == len(events) and all(fields <= set(p) for p in sub), version
        assert again.close() == 0


def test_a_rejection_inside_a_subagent_does_not_stop_it(engine, sandbox):
    wire = start(
        engine,
        agent_call("a1", "write it"),
        call("s1", "Shell", {"command": "touch made.txt"}),
        f"text: {LONG_ANSWER}",
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=answering("reject"))
    assert result == {"status": "finished"}
    [tool_result] = [
        e["payload"] for e in (p["event"] for p in wrapped(messages)) if e["type"] == "ToolResult"
    ]
    value = tool_result["return_value"]
    assert value["is_error"] and value["message"].startswith(
        "The tool call is rejected by the user. Try a different approach to complete your task"
    )
    assert not (sandbox.work / "made.txt").exists()
    assert results(messages)["a1"]["output"].endswith(f"[summary]\n{LONG_ANSWER}")
    assert payloads(messages, "ContentPart")[-1]["text"] == "parent done"
