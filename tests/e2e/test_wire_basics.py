"""The real `soulwire --wire` over pipes: the event sequences of the reference transcripts
(semantics, not wording), results and error codes."""

from __future__ import annotations

import json

from tests.wire_client import event_types, payloads

EXT_TOOL = {
    "name": "ext_ok",
    "description": "open a path",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


def call(call_id: str, name: str, args: dict[str, object] | str) -> str:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": arguments})


def test_handshake_reports_server_commands_and_session(engine):
    wire = engine("text: hi")
    result = wire.initialize(protocol_version="9.9", client={"name": "t", "version": "1"})["result"]
    assert result["protocol_version"] == "1.10"
    assert result["server"]["name"] == "Soulwire"
    assert all({"name", "description", "aliases"} <= set(c) for c in result["slash_commands"])
    assert "external_tools" not in result
    assert result["session"]["resumed"] is False and result["session"]["id"]
    assert wire.close() == 0


def test_plain_turn_with_thinking_and_usage(engine, sandbox):
    sandbox.capabilities = ["thinking"]
    wire = engine(
        "id: m1\nusage: input_other=100 output=20 input_cache_read=50\nthink: let me\nthink:  think\n"
        "text: Hello\ntext:  world"
    )
    wire.initialize()
    events, response = wire.prompt("hi")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "ContentPart",
        "ContentPart",
        "ContentPart",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    parts = payloads(events, "ContentPart")
    assert parts[0] == {"type": "think", "think": "let me", "encrypted": None}
    assert parts[3] == {"type": "text", "text": " world"}
    status = payloads(events, "StatusUpdate")[0]
    assert status == {
        "context_usage": 0.0015,
        "context_tokens": 150,
        "max_context_tokens": 100000,
        "token_usage": {"input_other": 100, "output": 20, "input_cache_read": 50, "input_cache_creation": 0},
        "message_id": "m1",
        "plan_mode": False,
        "mcp_status": None,
    }


def test_prompt_without_initialize_and_content_parts(engine):
    wire = engine("text: one", "text: two")
    events, response = wire.prompt("hi")
    assert response["result"]["status"] == "finished"
    assert payloads(events, "TurnBegin") == [{"user_input": "hi"}]
    events, response = wire.prompt([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert payloads(events, "TurnBegin") == [
        {"user_input": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


def test_external_tool_round_trip_and_rejections(engine):
    wire = engine(
        call("e1", "ext_ok", {"path": 5}),
        call("e2", "ext_ok", {"path": "a"}),
        call("e3", "ext_ok", {"path": "b"}),
        "text: done",
    )
    result = wire.initialize(
        external_tools=[
            EXT_TOOL,
            {"name": "bad", "parameters": {"type": 12}},
            {"name": "Shell", "description": "", "parameters": {}},
        ]
    )["result"]
    assert result["external_tools"]["accepted"] == ["ext_ok"]
    rejected = {r["name"]: r["reason"] for r in result["external_tools"]["rejected"]}
    assert rejected["Shell"] == "conflicts with builtin tool"
    assert "12" in rejected["bad"]

    answers = iter(
        [
            {"error": {"code": -1, "message": "ide exploded"}},
            {
                "result": {
                    "tool_call_id": "e3",
                    "return_value": {
                        "is_error": False,
                        "output": "Opened",
                        "message": "Opened b",
                        "display": [],
                    },
                }
            },
        ]
    )
    seen: list[dict] = []
    rid = wire.request("prompt", {"user_input": "go"})
    while True:
        message = wire.recv()
        assert message is not None
        if message.get("id") == rid and "method" not in message:
            break
        seen.append(message)
        if message.get("method") == "request":
            assert message["id"] == message["params"]["payload"]["id"]
            wire.send({"jsonrpc": "2.0", "id": message["id"], **next(answers)})
    assert message["result"] == {"status": "finished"}
    requests = [m for m in seen if m.get("method") == "request"]
    assert [r["params"]["payload"]["id"] for r in requests] == ["e2", "e3"]  # e1 never reached the client
    results = {r["tool_call_id"]: r["return_value"] for r in payloads(seen, "ToolResult")}
    assert results["e1"]["is_error"] and results["e1"]["message"].startswith(
        "Error validating JSON arguments"
    )
    assert results["e1"]["display"] == [{"type": "brief", "text": "Invalid arguments"}]
    assert results["e2"]["is_error"] and results["e2"]["message"] == "ide exploded"
    assert results["e3"] == {
        "is_error": False,
        "output": "Opened",
        "message": "Opened b",
        "display": [],
        "extras": None,
    }


def test_client_tools_conflict_only_with_tools_the_session_offers(engine):
    """As in the reference: a name conflicts with a built-in tool this session loaded (and with
    `Agent`, which its default agent always loads); `SearchWeb` without its service, `Think`
    (not in the default agent) and `ReadMediaFile` for a text-only model are free."""
    wire = engine("text: ok")
    names = ["SearchWeb", "Think", "ReadMediaFile", "Shell", "FetchURL", "TaskList", "Agent"]
    tools = [{"name": n, "description": f"client {n}", "parameters": {"type": "object"}} for n in names]
    result = wire.initialize(external_tools=tools)["result"]["external_tools"]
    assert result["accepted"] == ["SearchWeb", "Think", "ReadMediaFile"]
    assert {r["name"]: r["reason"] for r in result["rejected"]} == {
        n: "conflicts with builtin tool" for n in ("Shell", "FetchURL", "TaskList", "Agent")
    }
    assert wire.close() == 0


def test_unknown_tool_and_bad_json_arguments_continue_the_turn(engine):
    wire = engine(call("t1", "NoSuchTool", {}), call("t2", "ext_ok", "{not json"), "text: fine")
    wire.initialize(external_tools=[EXT_TOOL])
    events, response = wire.prompt("go")
    assert response["result"]["status"] == "finished"
    results = {r["tool_call_id"]: r["return_value"] for r in payloads(events, "ToolResult")}
    assert results["t1"]["message"] == "Tool `NoSuchTool` not found"
    assert results["t2"]["message"].startswith("Error parsing JSON arguments")
    assert event_types(events).count("StepBegin") == 3


def test_streamed_tool_arguments_are_assembled(engine, sandbox):
    wire = engine(
        'tool_call: {"id": "s1", "name": "ext_ok", "arguments": null}\n'
        'tool_call_part: {"arguments_part": "{\\"pa"}\ntool_call_part: {"arguments_part": "th\\": \\"x\\"}"}',
        "text: ok",
    )
    wire.initialize(external_tools=[EXT_TOOL])
    events, _ = wire.prompt(
        "go",
        answer=lambda m: {
            "tool_call_id": "s1",
            "return_value": {
                "is_error": False,
                "output": m["params"]["payload"]["arguments"],
                "message": "",
                "display": [],
            },
        },
    )
    assert event_types(events)[:6] == [
        "TurnBegin",
        "StepBegin",
        "ToolCall",
        "ToolCallPart",
        "ToolCallPart",
        "StatusUpdate",
    ]
    assert payloads(events, "ToolResult")[0]["return_value"]["output"] == '{"path": "x"}'


def test_max_steps_reached(engine):
    wire = engine(*(call(f"c{i}", "NoSuchTool", {}) for i in range(3)), args=("--max-steps-per-turn", "2"))
    events, response = wire.prompt("go")
    assert response["result"] == {"status": "max_steps_reached", "steps": 2}
    assert event_types(events).count("StepBegin") == 2
    assert event_types(events)[-1] == "TurnEnd"


def test_retry_then_success_and_errors(engine):
    wire = engine("error: 500 boom", "text: after retry", "error: 400 bad request", "text: next")
    wire.initialize(protocol_version="1.10")
    events, response = wire.prompt("one")
    assert response["result"]["status"] == "finished"
    retry = payloads(events, "StepRetry")[0]
    assert retry["n"] == 1 and retry["next_attempt"] == 2 and retry["max_attempts"] == 3
    assert retry["error_type"] == "APIStatusError" and retry["status_code"] == 500
    events, response = wire.prompt("two")
    assert response["error"]["code"] == -32003 and response["error"]["message"] == "bad request"
    assert event_types(events) == ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]
    events, response = wire.prompt("three")
    assert response["result"]["status"] == "finished"


def test_old_clients_do_not_receive_newer_event_types(engine):
    wire = engine("error: 503 busy", "text: ok")
    wire.initialize(protocol_version="1.3")
    events, response = wire.prompt("go")
    assert response["result"]["status"] == "finished"
    assert "StepRetry" not in event_types(events)


def test_scripts_exhausted_is_a_provider_error(engine):
    wire = engine("text: only one")
    wire.prompt("a")
    events, response = wire.prompt("b")
    assert response["error"]["code"] == -32003
    assert "exhausted" in response["error"]["message"]
    assert event_types(events) == ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]


def test_cancel_while_external_tool_pending_then_prompt_again(engine):
    wire = engine(call("w1", "ext_ok", {"path": "a"}), "text: again")
    wire.initialize(external_tools=[EXT_TOOL])
    rid = wire.request("prompt", {"user_input": "go"})
    while True:
        message = wire.recv()
        assert message is not None
        if message.get("method") == "request":
            break
    cid = wire.request("cancel")
    seen, response = wire.until_response(rid)
    assert response["result"] == {"status": "cancelled"}
    assert "TurnEnd" in event_types(seen)
    assert any(m.get("id") == cid and m.get("result") == {} for m in seen)
    _, response = wire.prompt("next")
    assert response["result"]["status"] == "finished"


def test_slash_commands(engine):
    wire = engine("text: hello")
    wire.prompt("hi")
    events, response = wire.prompt("/clear")
    assert response["result"]["status"] == "finished"
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "The context has been cleared."}]
    assert payloads(events, "StatusUpdate")[0]["context_tokens"] == 0
    events, _ = wire.prompt("/nope")
    assert payloads(events, "ContentPart")[0]["text"] == 'Unknown slash command "/nope".'


def test_llm_not_set_and_capability_missing(engine, sandbox):
    wire = engine("text: x")
    events, response = wire.prompt(
        [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]
    )
    assert response["error"]["code"] == -32002
    assert event_types(events) == ["TurnBegin", "TurnEnd"]
    wire.close()
    sandbox.config_extra = {"default_model": "", "models": {}, "providers": {}}
    wire = engine("text: x")
    events, response = wire.prompt("hi")
    assert response["error"]["code"] == -32001
    assert "config" in response["error"]["message"]
    assert event_types(events) == ["TurnBegin", "TurnEnd"]


def test_replay_streams_the_recorded_session(engine):
    wire = engine("text: hello", "text: world")
    _, response = wire.until_response(wire.request("replay"))
    assert response["result"] == {"status": "finished", "events": 0, "requests": 0}
    wire.prompt("a")
    wire.prompt("b")
    events, response = wire.until_response(wire.request("replay"))
    assert response["result"] == {"status": "finished", "events": 10, "requests": 0}
    assert event_types(events) == ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"] * 2
