"""`set_model` over the real engine: negotiated (`supports_model_switch`), the switch takes
effect at the next turn, `ModelChanged` tells the client, state.json keeps it, bad requests
get -32602 and a running turn -32000; a client that did not negotiate sees today's Wire."""

from __future__ import annotations

import json
from typing import Any

from tests.tool_calls import call
from tests.wire_client import Sandbox, add_echo_models, event_types, payloads

SWITCHING = {"protocol_version": "1.10", "capabilities": {"supports_model_switch": True}}


def state(sandbox: Sandbox) -> dict[str, Any]:
    [path] = sandbox.share.glob("sessions/*/*/state.json")
    return json.loads(path.read_text())


def test_set_model_switches_the_next_turn_and_tells_the_client(engine: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    wire = engine("text: from scripted", "text: never played")
    answer = wire.initialize(**SWITCHING)
    assert answer["result"]["capabilities"]["supports_model_switch"] is True
    _, current = wire.until_response(wire.request("set_model", {}))
    assert current["result"] == {
        "status": "ok", "model": "scripted", "model_name": "scripted_echo", "thinking": False,
        "can_think": False, "always_thinking": False, "models": ["scripted", "echo", "thinker"],
    }  # fmt: skip
    events, _ = wire.prompt("hi")
    assert [p["text"] for p in payloads(events, "ContentPart")] == ["from scripted"]

    events, switched = wire.until_response(wire.request("set_model", {"model": "echo"}))
    assert switched["result"]["model"] == "echo" and switched["result"]["model_name"] == "echo"
    [changed] = payloads(events, "ModelChanged")
    assert changed == {k: v for k, v in switched["result"].items() if k != "status"}
    events, _ = wire.prompt("text: from echo")
    assert [p["text"] for p in payloads(events, "ContentPart")] == ["from echo"]
    assert (state(sandbox)["model"], state(sandbox)["thinking"]) == ("echo", False)

    events, thinking = wire.until_response(wire.request("set_model", {"model": "thinker", "thinking": True}))
    assert (thinking["result"]["model"], thinking["result"]["thinking"]) == ("thinker", True)
    assert payloads(events, "ModelChanged")[0]["thinking"] is True
    assert (state(sandbox)["model"], state(sandbox)["thinking"]) == ("thinker", True)
    events, same = wire.until_response(wire.request("set_model", {"thinking": True}))
    assert same["result"]["thinking"] is True and "ModelChanged" not in event_types(events)  # nothing changed


def test_bad_set_model_requests_are_refused_and_change_nothing(engine: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    wire = engine("text: unused")
    wire.initialize(**SWITCHING)
    for params, words in (
        ({"model": "nope"}, "unknown model 'nope' (models: scripted, echo, thinker)"),
        ({"thinking": True}, "the model 'scripted' cannot think"),
        ({"modle": "echo"}, "modle"),
        ({"model": ""}, "model"),
        ({"thinking": "yes"}, "thinking"),
    ):
        events, refused = wire.until_response(wire.request("set_model", params))
        assert refused["error"]["code"] == -32602, params
        assert words in refused["error"]["message"]
        assert "ModelChanged" not in event_types(events)
    _, current = wire.until_response(wire.request("set_model", {}))
    assert current["result"]["model"] == "scripted"


def test_set_model_waits_for_the_running_turn(engine: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    wire = engine(call("c1", "Shell", {"command": "true"}), "text: done")
    wire.initialize(**SWITCHING)
    prompt_id = wire.request("prompt", {"user_input": "run it"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass  # the turn now waits for the approval
    assert message is not None
    _, busy = wire.until_response(wire.request("set_model", {"model": "echo"}))
    assert busy["error"]["code"] == -32000 and busy["error"]["data"]["reason"] == "busy"
    _, current = wire.until_response(wire.request("set_model", {}))  # reading it is fine meanwhile
    assert current["result"]["model"] == "scripted"
    wire.respond(message["id"], {"request_id": message["params"]["payload"]["id"], "response": "approve"})
    _, ended = wire.until_response(prompt_id)
    assert ended["result"]["status"] == "finished"


def test_a_client_that_did_not_negotiate_sees_todays_wire(engine: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    wire = engine("text: unused")
    answer = wire.initialize(protocol_version="1.10", capabilities={"supports_plan_mode": True})
    assert "supports_model_switch" not in answer["result"]["capabilities"]
    _, refused = wire.until_response(wire.request("set_model", {"model": "echo"}))
    assert refused["error"]["code"] == -32601


def test_the_model_command_switches_inside_the_session(engine: Any, sandbox: Sandbox) -> None:
    add_echo_models(sandbox)
    wire = engine("text: unused")
    wire.initialize(**SWITCHING)
    events, _ = wire.prompt("/model")
    assert [p["text"] for p in payloads(events, "ContentPart")] == [
        "Model: scripted (thinking off). Models: scripted, echo, thinker; /model NAME switches."
    ]
    events, _ = wire.prompt("/model thinker thinking")
    assert [p["text"] for p in payloads(events, "ContentPart")] == ["Model: thinker (thinking on)."]
    [changed] = payloads(events, "ModelChanged")
    assert (changed["model"], changed["thinking"]) == ("thinker", True)
    for command, words in (
        ("/model nope", "Cannot switch: unknown model 'nope'"),
        ("/model a b", "Usage: /model"),
    ):
        events, _ = wire.prompt(command)
        assert words in payloads(events, "ContentPart")[0]["text"] and "ModelChanged" not in event_types(
            events
        )
    events, _ = wire.prompt("text: now echoed")  # the next turn runs on the model /model chose
    assert [p["text"] for p in payloads(events, "ContentPart")] == ["now echoed"]
