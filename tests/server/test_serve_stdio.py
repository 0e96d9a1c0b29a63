"""The server's extensions on stdio: `soulwire --wire` with a client whose `initialize` asks
for them (a `serve` member) speaks them too; a client that does not gets today's Wire."""

from __future__ import annotations

import base64
import json

from tests.server.serve_client import seqs
from tests.server.test_serve_lifecycle import gone, long_running, wait_for_pid
from tests.tool_calls import call

SHELL = ("text: s\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")


def test_an_old_client_on_stdio_sees_todays_wire(engine):
    wire = engine("text: hi")
    result = wire.initialize(protocol_version="1.10")["result"]
    assert "serve" not in result
    messages, _ = wire.prompt("hello")
    assert messages and not seqs(messages)
    rid = wire.request("approvals/rules/list")
    _, refused = wire.until_response(rid)
    assert refused["error"]["code"] == -32601  # not offered unless negotiated
    assert wire.close() == 0


def test_stdio_numbers_events_puts_deadlines_on_requests_and_keeps_rules(engine):
    wire = engine(*SHELL, *SHELL)
    result = wire.initialize(protocol_version="1.10", serve={"seq": True, "deadline_ms": 60_000})["result"]
    assert result["serve"]["mode"] == "controller" and result["serve"]["deadline_ms"] == 60_000
    assert result["serve"]["loaded"]["session_id"] == result["session"]["id"]
    from soulwire.server.protocol import ServeInfo

    ServeInfo.model_validate(result["serve"], strict=True)
    seen: list[dict] = []

    def approve_for_session(message: dict) -> dict:
        seen.append(message)
        return {"request_id": message["params"]["payload"]["id"], "response": "approve_for_session"}

    messages, done = wire.prompt("go", answer=approve_for_session)
    assert done["result"]["status"] == "finished"
    numbers = seqs(messages)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    (request,) = seen
    assert request["params"]["deadline_ms"] == 60_000 and request["params"]["on_timeout"] == "reject"
    _, listed = wire.until_response(wire.request("approvals/rules/list"))
    assert listed["result"]["rules"] == ["run command: echo ok"]
    _, removed = wire.until_response(wire.request("approvals/rules/remove", {"rule": "run command: echo ok"}))
    assert removed["result"]["rules"] == []
    _, added = wire.until_response(wire.request("approvals/rules/add", {"rule": "Shell(echo *)"}))
    assert added["result"]["rules"] == ["Shell(echo *)"]
    again, _ = wire.prompt("again", answer=approve_for_session)
    assert len(seen) == 1 and not any(m.get("method") == "request" for m in again)  # the pattern
    assert wire.close() == 0


def test_stdio_cancel_receipt_and_large_payloads_by_reference(engine, sandbox):
    pid_file = sandbox.root / "tool.pid"
    wire = engine("text: big", long_running(pid_file), "text: after", args=("--yolo",))
    wire.initialize(protocol_version="1.10", serve={"seq": True, "max_message_bytes": 65_536})
    text = "x" * 80_000  # over the 64 KiB limit, under the scripted model's compaction threshold
    messages, _ = wire.prompt(text)
    begin = next(m for m in messages if m["params"].get("type") == "TurnBegin")["params"]
    assert "payload" not in begin and begin["blob"]["size"] > 80_000
    _, chunk = wire.until_response(wire.request("blob/read", {"blob_id": begin["blob"]["blob_id"]}))
    assert base64.b64decode(chunk["result"]["data"]).startswith(b'{"user_input":"xxx')

    wire.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    _, cancelled = wire.until_response(wire.request("cancel"), timeout=30)
    receipt = cancelled["result"]["receipt"]
    assert receipt["stopped"]["tool_calls"] == [{"id": "tc-1", "name": "Shell"}]
    assert receipt["stopped"]["process_groups"] == [pid] and gone(pid)
    assert wire.close() == 0
    assert json.loads(json.dumps(receipt))  # plain JSON


def test_sigterm_ends_an_extended_stdio_engine_cleanly(engine, sandbox):
    import signal

    pid_file = sandbox.root / "tool.pid"
    wire = engine(long_running(pid_file), "text: after", args=("--yolo",))
    wire.initialize(protocol_version="1.10", serve={"seq": True})
    prompt = wire.request("prompt", {"user_input": "go"})
    pid = wait_for_pid(pid_file)
    wire.proc.send_signal(signal.SIGTERM)
    _, answer = wire.until_response(prompt, timeout=30)
    assert answer["result"]["status"] == "cancelled"
    assert wire.close() == 0 and gone(pid)
