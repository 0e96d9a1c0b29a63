"""`steer` over the real engine: input queued during a turn joins the context at the next step
boundary as a user message with a SteerInput event — during a pending approval, during a
running tool, and when the model would have ended the turn (it then runs another step)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from tests.fake_llm_server import FakeLLMServer, Gate
from tests.provider_streams import Answer, stream_reply
from tests.tool_calls import answering, approve, call, results
from tests.wire_client import WireProcess, engine_env, event_types, payloads

V110 = "1.10"


def context_records(share: Path) -> list[dict[str, Any]]:
    [path] = share.glob("sessions/*/*/context.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def until(wire: WireProcess, predicate: Any) -> list[dict[str, Any]]:
    """Messages up to and including the first one `predicate` accepts."""
    seen: list[dict[str, Any]] = []
    while True:
        message = wire.recv()
        assert message is not None, "the engine closed stdout"
        seen.append(message)
        if predicate(message):
            return seen


def is_type(kind: str) -> Any:
    return lambda m: (m.get("params") or {}).get("type") == kind


def test_steer_during_a_pending_approval(engine, sandbox):
    wire = engine("text: working\n" + call("tc-1", "Shell", {"command": "echo hi"}), "text: done after steer")
    wire.initialize(protocol_version=V110)
    prompt = wire.request("prompt", {"user_input": "run"})
    before = until(wire, lambda m: m.get("method") == "request")
    steer = wire.request("steer", {"user_input": "also do this"})
    seen, response = wire.until_response(steer)
    assert response["result"] == {"status": "steered"} and seen == []
    wire.respond(before[-1]["id"], approve(before[-1]))
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"}
    assert event_types(after) == [
        "ApprovalResponse", "ToolResult", "SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
    ]  # fmt: skip
    assert payloads(after, "SteerInput") == [{"user_input": "also do this"}]
    wire.close()
    roles = [(r["role"], r.get("content")) for r in context_records(sandbox.share) if r["role"] != "_usage"]
    steered = roles.index(("user", "also do this"))
    assert roles[steered - 1][0] == "tool" and roles[steered + 1][0] == "_checkpoint"
    assert roles[steered + 2] == ("assistant", "done after steer")


def test_steer_during_a_running_tool(engine, sandbox):
    gate = sandbox.work / "go"
    command = f"while [ ! -f {gate} ]; do sleep 0.02; done; echo released"
    wire = engine(call("tc-1", "Shell", {"command": command}), "text: steered reply", args=("--yolo",))
    wire.initialize(protocol_version=V110)
    prompt = wire.request("prompt", {"user_input": "go"})
    until(wire, is_type("ToolCall"))
    _, response = wire.until_response(
        wire.request("steer", {"user_input": [{"type": "text", "text": "use python"}]})
    )
    assert response["result"] == {"status": "steered"}
    gate.touch()
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"}
    kinds = event_types(after)
    assert kinds[kinds.index("ToolResult") :] == [
        "ToolResult", "SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
    ]  # fmt: skip
    assert results(after)["tc-1"]["output"] == "released\n"
    assert payloads(after, "SteerInput") == [{"user_input": [{"type": "text", "text": "use python"}]}]


def test_a_steer_keeps_a_turn_going_that_a_rejection_would_end(engine):
    wire = engine(call("tc-1", "Shell", {"command": "echo no"}), "text: ok, python then")
    wire.initialize(protocol_version=V110)
    prompt = wire.request("prompt", {"user_input": "run"})
    request = until(wire, lambda m: m.get("method") == "request")[-1]
    wire.until_response(wire.request("steer", {"user_input": "use python instead"}))
    wire.respond(request["id"], answering("reject")(request))
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"}
    assert event_types(after)[2:] == ["SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]


def test_a_steer_that_arrives_as_the_model_stops_runs_another_step(tmp_path: Path):
    """The model's last step streams text only (it would end the turn); the steer arrives
    while it streams, so the engine runs one more step with it."""
    (tmp_path / "work").mkdir()
    with FakeLLMServer() as server:
        release = threading.Event()
        first = stream_reply("openai_legacy", Answer("m1", text=["thinking it over", " done"]))
        cut = next(i for i, c in enumerate(first.chunks) if isinstance(c, bytes) and b"thinking it over" in c)
        first.chunks.insert(cut + 1, Gate(release))
        server.queue(first, stream_reply("openai_legacy", Answer("m2", text=["with the steer"])))
        config = {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "test-model", "max_context_size": 100_000}},
            "providers": {"p": {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "k"}},
        }
        (tmp_path / "config.json").write_text(json.dumps(config))
        argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(tmp_path / "config.json")]
        wire = WireProcess([*argv, "--work-dir", str(tmp_path / "work")], engine_env(tmp_path), tmp_path)
        try:
            wire.initialize(protocol_version=V110)
            prompt = wire.request("prompt", {"user_input": "hi"})
            until(wire, is_type("ContentPart"))
            _, response = wire.until_response(wire.request("steer", {"user_input": "and mention the steer"}))
            assert response["result"] == {"status": "steered"}
            release.set()
            after, done = wire.until_response(prompt)
            assert done["result"] == {"status": "finished"}
            kinds = event_types(after)
            assert kinds[kinds.index("SteerInput") :] == [
                "SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
            ]  # fmt: skip
            second = json.dumps(server.requests[1].body["messages"])
            assert "and mention the steer" in second and "thinking it over done" in second
        finally:
            release.set()
            wire.close()


def test_steer_errors(engine, sandbox):
    gate = sandbox.work / "go"
    wire = engine(
        call("tc-1", "Shell", {"command": f"while [ ! -f {gate} ]; do sleep 0.02; done"}), "text: one"
    )
    wire.initialize(protocol_version=V110)
    _, idle = wire.until_response(wire.request("steer", {"user_input": "x"}))
    assert idle["error"] == {
        "code": -32000,
        "message": "No agent turn is in progress",
        "data": {"reason": "idle"},
    }
    prompt = wire.request("prompt", {"user_input": "go"})
    request = until(wire, lambda m: m.get("method") == "request")[-1]
    for params in (None, {}, {"user_input": 5}, {"user_input": [{"type": "bogus"}]}):
        _, bad = wire.until_response(wire.request("steer", params))
        assert bad["error"]["code"] == -32602
        assert bad["error"]["message"].startswith("Invalid parameters for method `steer`: user_input")
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    _, unsupported = wire.until_response(wire.request("steer", {"user_input": image}))
    assert unsupported["error"]["code"] == -32002  # the model takes no images: refused at once
    gate.touch()
    wire.respond(request["id"], approve(request))
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"} and "SteerInput" not in event_types(after)


def test_a_steer_too_late_for_its_turn_is_dropped(engine, sandbox):
    """A steer that arrives after the last step boundary (here: while a Stop hook runs) is
    discarded when the next turn starts."""
    gate = sandbox.work / "go"
    sandbox.config_extra = {
        "hooks": [{"event": "Stop", "command": f"while [ ! -f {gate} ]; do sleep 0.02; done"}]
    }
    wire = engine("text: first", "text: second")
    wire.initialize(protocol_version=V110)
    prompt = wire.request("prompt", {"user_input": "one"})
    until(wire, is_type("HookTriggered"))
    _, response = wire.until_response(wire.request("steer", {"user_input": "too late"}))
    assert response["result"] == {"status": "steered"}
    gate.touch()
    wire.until_response(prompt)
    events, _ = wire.prompt("two")
    assert "SteerInput" not in event_types(events)
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "second"}]
    wire.close()
    assert "too late" not in json.dumps(context_records(sandbox.share))


def test_a_client_of_protocol_1_3_that_steers_gets_the_event(engine, sandbox):
    """A 1.3 client that sends `steer` knows steering (issue 13): it gets SteerInput."""
    gate = sandbox.work / "go"
    command = f"while [ ! -f {gate} ]; do sleep 0.02; done"
    wire = engine(call("tc-1", "Shell", {"command": command}), "text: done", args=("--yolo",))
    wire.initialize(protocol_version="1.3")
    prompt = wire.request("prompt", {"user_input": "go"})
    until(wire, is_type("ToolCall"))
    wire.until_response(wire.request("steer", {"user_input": "psst"}))
    gate.touch()
    after, _ = wire.until_response(prompt)
    assert payloads(after, "SteerInput") == [{"user_input": "psst"}]
    wire.close()
    assert ("user", "psst") in [(r["role"], r.get("content")) for r in context_records(sandbox.share)]


def test_a_steer_before_the_first_step_joins_after_it(engine, sandbox):
    gate = sandbox.work / "go"
    sandbox.config_extra = {
        "hooks": [{"event": "UserPromptSubmit", "command": f"while [ ! -f {gate} ]; do sleep 0.02; done"}]
    }
    wire = engine("text: one", "text: two")
    wire.initialize(protocol_version=V110)
    prompt = wire.request("prompt", {"user_input": "start"})
    until(wire, is_type("HookTriggered"))
    wire.until_response(wire.request("steer", {"user_input": "early"}))
    gate.touch()
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"}
    assert event_types(after) == [
        "HookResolved", "StepBegin", "ContentPart", "StatusUpdate", "SteerInput",
        "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
    ]  # fmt: skip


def test_a_minimal_1_10_client_gets_steer_input_in_the_reference_order(engine, sandbox):
    """`initialize` with nothing but `protocol_version: "1.10"` (the Go SDK's shape, served
    as 1.3 otherwise): SteerInput answers the client's own `steer`, so it is sent, after the
    running tool's result and before the next step, as the reference does (spec A.5)."""
    gate = sandbox.work / "go"
    command = f"while [ ! -f {gate} ]; do sleep 0.02; done; echo hi"
    wire = engine(call("tc-1", "Shell", {"command": command}), "text: steered reply", args=("--yolo",))
    _, reply = wire.until_response(wire.request("initialize", {"protocol_version": V110}))
    assert reply["result"]["protocol_version"] == V110
    prompt = wire.request("prompt", {"user_input": "go"})
    until(wire, is_type("ToolCall"))
    _, response = wire.until_response(wire.request("steer", {"user_input": "use python"}))
    assert response["result"] == {"status": "steered"}
    gate.touch()
    after, done = wire.until_response(prompt)
    assert done["result"] == {"status": "finished"}
    kinds = event_types(after)
    assert kinds[kinds.index("ToolResult") :] == [
        "ToolResult", "SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd",
    ]  # fmt: skip
    assert payloads(after, "SteerInput") == [{"user_input": "use python"}]
