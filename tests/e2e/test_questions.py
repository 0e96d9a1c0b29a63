"""AskUserQuestion over the real engine: a QuestionRequest whose JSON-RPC id is its payload
id, answers (multi-select included) in the tool result, and every way a question can end
without an answer — error reply, empty answers, afk, a client that cannot take questions,
cancel — ends it, never hangs it."""

from __future__ import annotations

import json
from typing import Any

from tests.tool_calls import call, results
from tests.wire_client import event_types

QUESTIONS = [
    {
        "question": "Which databases?",
        "header": "DB",
        "options": [{"label": "Postgres"}, {"label": "SQLite", "description": "embedded"}],
        "multi_select": True,
    },
    {"question": "Deploy now?", "options": [{"label": "Yes"}, {"label": "No"}]},
]
ASK = call("q1", "AskUserQuestion", {"questions": QUESTIONS})
ASKING = {"protocol_version": "1.10", "capabilities": {"supports_question": True}}


def question_requests(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("method") == "request" and m["params"]["type"] == "QuestionRequest"]


def test_multi_select_answers_reach_the_model(engine):
    wire = engine(ASK, "text: noted")
    wire.initialize(**ASKING)

    def answer(message: dict[str, Any]) -> dict[str, Any]:
        return {
            "request_id": message["id"],
            "answers": {"Which databases?": "Postgres, SQLite", "Deploy now?": "No"},
        }

    events, response = wire.prompt("ask me", answer=answer)
    assert response["result"] == {"status": "finished"}
    [request] = question_requests(events)
    payload = request["params"]["payload"]
    assert request["id"] == payload["id"] and payload["tool_call_id"] == "q1"
    assert payload["questions"][0] == {
        "question": "Which databases?", "header": "DB",
        "options": [{"label": "Postgres", "description": ""}, {"label": "SQLite", "description": "embedded"}],
        "multi_select": True, "body": "", "other_label": "", "other_description": "",
    }  # fmt: skip
    value = results(events)["q1"]
    assert value["is_error"] is False and value["message"] == "User has answered."
    assert json.loads(value["output"]) == {
        "answers": {"Which databases?": "Postgres, SQLite", "Deploy now?": "No"}
    }
    assert value["display"] == [{"type": "brief", "text": "User answered"}]
    kinds = event_types(events)
    assert kinds.index("request:QuestionRequest") < kinds.index("ToolResult") < kinds.index("TurnEnd")


def test_error_reply_and_empty_answers_are_dismissals(engine):
    wire = engine(ASK, "text: a", ASK, "text: b", ASK, "text: c")
    wire.initialize(**ASKING)
    prompt = wire.request("prompt", {"user_input": "one"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass
    assert message is not None
    wire.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "no UI"}})
    events, _ = wire.until_response(prompt)
    assert results(events)["q1"]["display"] == [{"type": "brief", "text": "Dismissed"}]
    events, _ = wire.prompt("two", answer=lambda m: {"request_id": m["id"], "answers": {}})
    assert results(events)["q1"]["message"] == "User dismissed the question."
    events, _ = wire.prompt("three", answer=lambda m: {"request_id": m["id"], "answers": "not a mapping"})
    assert results(events)["q1"]["message"] == "User dismissed the question."


def test_cancel_while_a_question_waits(engine):
    wire = engine(ASK, "text: after")
    wire.initialize(**ASKING)
    prompt = wire.request("prompt", {"user_input": "ask"})
    while (message := wire.recv()) is not None and message.get("method") != "request":
        pass
    _, cancelled = wire.until_response(wire.request("cancel"))
    assert cancelled["result"] == {}
    _, response = wire.until_response(prompt)
    assert response["result"] == {"status": "cancelled"}
    events, _ = wire.prompt("next")
    assert [e["params"]["payload"] for e in events if e["params"]["type"] == "ContentPart"] == [
        {"type": "text", "text": "after"}
    ]


def test_afk_dismisses_without_asking(engine):
    wire = engine(ASK, "text: on my own", args=("--afk",))
    wire.initialize(**ASKING)
    events, _ = wire.prompt("ask")
    assert not question_requests(events)
    value = results(events)["q1"]
    assert not value["is_error"] and value["display"] == [{"type": "brief", "text": "Dismissed (afk)"}]


def test_hidden_from_clients_without_supports_question(engine):
    wire = engine(ASK, "text: ok")
    wire.initialize(protocol_version="1.10", capabilities={"supports_plan_mode": True})
    events, _ = wire.prompt("ask")
    assert results(events)["q1"]["message"] == "Tool `AskUserQuestion` not found"


def test_a_client_without_initialize_gets_an_error_result_not_a_request(engine):
    wire = engine(ASK, "text: ok")
    events, response = wire.prompt("ask")
    assert response["result"] == {"status": "finished"} and not question_requests(events)
    value = results(events)["q1"]
    assert value["is_error"] and "does not support interactive questions" in value["message"]
