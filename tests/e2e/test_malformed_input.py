"""Bad input of every shape gets the right JSON-RPC error, and the server keeps serving."""

from __future__ import annotations

import pytest
from tests.wire_client import WireProcess

BARRIER_ID = "barrier"


def reply_to(wire: WireProcess, line: str | bytes) -> dict | None:
    """Send one line, then a barrier request; the reply to the line (or None if it got none)."""
    wire.send_raw(line)
    wire.send({"jsonrpc": "2.0", "id": BARRIER_ID, "method": "cancel"})
    got = None
    while True:
        message = wire.recv()
        assert message is not None
        if message.get("id") == BARRIER_ID:
            return got
        got = message


@pytest.mark.parametrize(
    ("line", "code", "echoed_id"),
    [
        ("{not-json}", -32700, None),
        ("", -32700, None),
        (b"\xff\xfe garbage", -32700, None),
        ("[1, 2]", -32600, None),
        ('"just a string"', -32600, None),
        ('{"jsonrpc":"2.1","id":"v"}', -32600, None),
        ('{"jsonrpc":"2.0","id":7,"method":"cancel"}', -32600, None),
        ('{"jsonrpc":"2.0","id":"u","method":"nope"}', -32601, "u"),
        ('{"jsonrpc":"2.0","id":"ev","method":"event","params":{}}', -32601, "ev"),
        ('{"jsonrpc":"2.0","id":"p","method":"prompt"}', -32602, "p"),
        ('{"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":5}}', -32602, "p"),
        (
            '{"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":[{"type":"bogus"}]}}',
            -32602,
            "p",
        ),
        ('{"jsonrpc":"2.0","id":"i","method":"initialize","params":{}}', -32602, "i"),
        (
            '{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocol_version":"1.3","external_tools":5}}',
            -32602,
            "i",
        ),
        ('{"id":"c","method":"cancel"}', -32000, "c"),
    ],
)
def test_error_replies(engine, line, code, echoed_id):
    wire = engine("text: still alive")
    reply = reply_to(wire, line)
    assert reply is not None and reply["error"]["code"] == code
    assert reply["id"] == echoed_id
    data = reply["error"]["data"]
    # The reference sends no data; ours is structured: the field at fault, the state's reason.
    assert (
        data is None or (code == -32602 and "field" in data) or (code == -32000 and data["reason"] == "idle")
    )
    _, response = wire.prompt("hi")  # still serving
    assert response["result"]["status"] == "finished"


@pytest.mark.parametrize(
    "line",
    [
        "{}",
        '{"jsonrpc":"2.0","method":"cancel"}',
        '{"jsonrpc":"2.0","method":"nope"}',
        '{"jsonrpc":"2.0","id":"zzz","result":{}}',
        '{"jsonrpc":"2.0","id":"zzz","error":{"code":1,"message":"x"}}',
    ],
)
def test_silently_ignored(engine, line):
    wire = engine("text: x")
    assert reply_to(wire, line) is None


def test_busy_and_idle_states(engine):
    wire = engine('tool_call: {"id": "w", "name": "ext", "arguments": "{}"}', "text: end")
    wire.initialize(external_tools=[{"name": "ext", "description": "", "parameters": {"type": "object"}}])
    rid = wire.request("prompt", {"user_input": "go"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass
    for method in ("prompt", "initialize", "replay"):
        params = {"user_input": "x"} if method == "prompt" else {"protocol_version": "1.3"}
        _, response = wire.until_response(wire.request(method, params))
        assert response["error"] == {
            "code": -32000,
            "message": "An agent turn is already in progress",
            "data": {"reason": "busy"},
        }
    wire.respond(
        "w",
        {
            "tool_call_id": "w",
            "return_value": {"is_error": False, "output": "", "message": "", "display": []},
        },
    )
    _, response = wire.until_response(rid)
    assert response["result"]["status"] == "finished"
    _, response = wire.until_response(wire.request("cancel"))
    assert response["error"]["code"] == -32000


def test_huge_line_is_read(engine):
    wire = engine("text: big")
    big = "x" * (8 * 1024 * 1024)
    _, response = wire.prompt(big)
    assert response["result"]["status"] == "finished"


def test_eof_exits_zero_and_stdout_is_only_json(engine):
    wire = engine("text: a")
    wire.prompt("hi")
    assert wire.close() == 0
