"""Faults at the protocol layer that must not hurt (issue 12): a cancel in the same write as
its prompt, wrongly typed `initialize` params, deeply nested JSON, text that is not valid
UTF-8 or holds lone surrogates. Each gets the right answer and the engine keeps serving."""

from __future__ import annotations

import json

import pytest
from tests.tool_calls import call
from tests.wire_client import Sandbox, WireProcess


def still_serving(wire: WireProcess) -> None:
    _, response = wire.prompt("still there?")
    assert response["result"]["status"] == "finished", response


def replies(wire: WireProcess, line: bytes, count: int) -> list[dict]:
    """Send one raw write; collect the first `count` responses (events skipped)."""
    wire.send_raw(line)
    got: list[dict] = []
    while len(got) < count:
        message = wire.recv()
        assert message is not None, "".join(wire.stderr_lines)
        if "method" not in message:
            got.append(message)
    return got


def test_prompt_and_cancel_in_one_write_cancel_the_turn_before_any_tool_runs(engine, sandbox: Sandbox):
    marker = sandbox.work / "ran"
    shell = call("c1", "Shell", {"command": f"touch {marker}"})
    wire = engine(shell, shell, shell, "text: done", "text: still there", args=("--yolo",))
    wire.initialize()
    prompt = {"jsonrpc": "2.0", "id": "p", "method": "prompt", "params": {"user_input": "go"}}
    cancel = {"jsonrpc": "2.0", "id": "c", "method": "cancel"}
    line = (json.dumps(prompt) + "\n" + json.dumps(cancel)).encode()
    answers = {r["id"]: r for r in replies(wire, line, 2)}
    assert answers["c"] == {"jsonrpc": "2.0", "id": "c", "result": {}}
    assert answers["p"]["result"] == {"status": "cancelled"}
    assert not marker.exists()
    still_serving(wire)


def test_cancel_sent_before_the_first_event_is_read(engine, sandbox: Sandbox):
    marker = sandbox.work / "ran"
    shell = call("c1", "Shell", {"command": f"sleep 0.2; touch {marker}"})
    wire = engine(shell, "text: done", "text: still there", args=("--yolo",))
    wire.initialize()
    prompt_id = wire.request("prompt", {"user_input": "go"})
    cancel_id = wire.request("cancel")
    seen, response = wire.until_response(prompt_id)
    assert response["result"] == {"status": "cancelled"}
    cancel_answer = next(m for m in seen if m.get("id") == cancel_id)
    assert cancel_answer["result"] == {}
    assert not marker.exists()
    still_serving(wire)


BAD_INITIALIZE = [
    ({"protocol_version": "1.9", "capabilities": False}, "capabilities"),
    ({"protocol_version": "1.9", "capabilities": []}, "capabilities"),
    ({"protocol_version": "1.9", "capabilities": ""}, "capabilities"),
    ({"protocol_version": "1.9", "capabilities": 0}, "capabilities"),
    (
        {"protocol_version": "1.9", "capabilities": {"supports_question": []}},
        "capabilities.supports_question",
    ),
    (
        {"protocol_version": "1.9", "capabilities": {"supports_plan_mode": "yes"}},
        "capabilities.supports_plan_mode",
    ),
    ({"protocol_version": "1.9", "capabilities": {"supports_question": 1}}, "capabilities.supports_question"),
    ({"protocol_version": 1.9}, "protocol_version"),
    ({"protocol_version": "1.9", "client": "me"}, "client"),
    ({"protocol_version": "1.9", "client": {"name": 5}}, "client.name"),
    ({"protocol_version": "1.9", "client": {"name": "x", "version": 2}}, "client.version"),
    ({"protocol_version": "1.9", "hooks": {}}, "hooks"),
    ({"protocol_version": "1.9", "hooks": [{"id": "h", "event": 3}]}, "hooks.0.event"),
    ({"protocol_version": "1.9", "hooks": [{"id": "h", "event": "Stop", "timeout": "5"}]}, "hooks.0.timeout"),
    (
        {"protocol_version": "1.9", "external_tools": [{"name": "t", "parameters": []}]},
        "external_tools.0.parameters",
    ),
    ({"protocol_version": "1.9", "external_tools": "none"}, "external_tools"),
]


@pytest.mark.parametrize("first", [True, False], ids=["first-line", "after-handshake"])
@pytest.mark.parametrize(("params", "field"), BAD_INITIALIZE, ids=[f for _, f in BAD_INITIALIZE])
def test_wrongly_typed_initialize_fields_are_refused_by_name(engine, shared_engine, params, field, first):
    """Both the lean start-up path (first line) and the full server refuse them alike."""
    wire = engine("text: still there") if first else shared_engine()
    _, response = wire.until_response(wire.request("initialize", params))
    error = response["error"]
    assert error["code"] == -32602
    assert error["message"].startswith(f"Invalid parameters for method `initialize`: {field}")
    assert error["data"] == {"field": field}
    if first:  # nothing was adopted: a correct handshake still works
        assert "result" in wire.initialize()
    still_serving(wire)


def nested(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "array" else ('{"a":' * depth + "1" + "}" * depth)


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("kind", ["array", "object"])
@pytest.mark.parametrize("where", ["bare", "prompt", "extra-field"])
def test_deeply_nested_json_is_refused_and_the_engine_keeps_serving(shared_engine, depth, kind, where):
    wire = shared_engine()
    deep = nested(depth, kind)
    if where == "bare":
        line = deep
    elif where == "prompt":
        line = '{"jsonrpc":"2.0","id":"d","method":"prompt","params":{"user_input":' + deep + "}}"
    else:
        part = '{"type":"text","text":"hi","extra":' + deep + "}"
        line = '{"jsonrpc":"2.0","id":"d","method":"prompt","params":{"user_input":[' + part + "]}}"
    [answer] = replies(wire, line.encode(), 1)
    assert answer["error"]["code"] in (-32700, -32600)
    still_serving(wire)


def test_nesting_within_the_limit_is_served(shared_engine):
    wire = shared_engine()
    part = '{"type":"text","text":"hi","extra":' + nested(60, "array") + "}"
    line = '{"jsonrpc":"2.0","id":"d","method":"prompt","params":{"user_input":[' + part + "]}}"
    wire.send_raw(line)
    _, response = wire.until_response("d")
    assert response["result"]["status"] == "finished"
    still_serving(wire)


def test_invalid_utf8_is_a_parse_error(shared_engine):
    wire = shared_engine()
    line = b'{"jsonrpc":"2.0","id":"u","method":"prompt","params":{"user_input":"caf\xe9"}}'
    [answer] = replies(wire, line, 1)
    assert answer["error"]["code"] == -32700
    still_serving(wire)


MALFORMED_TEXT = [
    (b"a\xed\xa0\x80b", -32700),  # a UTF-16 surrogate encoded as UTF-8 (not UTF-8)
    (b"\xed\xa0\xbd\xed\xb0\x80", -32700),  # a surrogate pair so encoded (CESU-8)
    (b"\xc0\xaf", -32700),  # an overlong "/"
    (b"\xf8\x88\x80\x80\x80", -32700),  # a five-byte sequence
    (b"a\x00b", -32700),  # a raw NUL: a control character inside a JSON string
    (b"a\\u0000b", None),  # an escaped NUL is text like any other
    (b"a\\ud800b", None),  # a lone surrogate escape is replaced (see below)
]


@pytest.mark.parametrize(("text", "code"), MALFORMED_TEXT)
def test_malformed_text_in_a_prompt_gets_the_right_code_and_no_python_text(shared_engine, text, code):
    wire = shared_engine()
    line = b'{"jsonrpc":"2.0","id":"m","method":"prompt","params":{"user_input":"' + text + b'"}}'
    [answer] = replies(wire, line, 1)
    if code is None:
        assert answer["id"] == "m" and answer["result"]["status"] == "finished", answer
    else:
        assert answer["id"] is None and answer["error"]["code"] == code
        message = answer["error"]["message"]
        assert message.startswith("Invalid JSON format")
        assert "Error" not in message and "codec" not in message and "position" not in message
    still_serving(wire)


def test_lone_surrogates_are_replaced_and_recorded(engine, sandbox: Sandbox):
    wire = engine("text: ok", "text: still there")
    hello = wire.initialize()
    line = b'{"jsonrpc":"2.0","id":"s","method":"prompt","params":{"user_input":"a\\ud800b\\udc00c"}}'
    wire.send_raw(line)
    events, response = wire.until_response("s")
    assert response["result"]["status"] == "finished"
    begin = next(e for e in events if e.get("params", {}).get("type") == "TurnBegin")
    assert begin["params"]["payload"]["user_input"] == "a\ufffd\ufffd\ufffdb\ufffd\ufffd\ufffdc"
    still_serving(wire)
    wire.close()
    session_id = hello["result"]["session"]["id"]
    [context] = sandbox.share.glob(f"sessions/*/{session_id}/context.jsonl")
    assert "a\ufffd" in context.read_text(encoding="utf-8")
