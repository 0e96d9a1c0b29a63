"""Helpers for tool tests: echo-DSL lines for tool calls, and results picked out of a turn."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.wire_client import WireProcess, payloads


def call(call_id: str, name: str, args: dict[str, Any] | str) -> str:
    """One `tool_call:` DSL line (arguments given as an object or as raw text)."""
    arguments = args if isinstance(args, str) else json.dumps(args)
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": arguments})


def one_step_each(*calls: tuple[str, str, dict[str, Any] | str]) -> list[str]:
    """A script per call (one call per step), then a closing text step."""
    return [call(*c) for c in calls] + ["text: done"]


def results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """return_value of every ToolResult, by tool call id."""
    return {r["tool_call_id"]: r["return_value"] for r in payloads(messages, "ToolResult")}


def requests(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Payloads of the ApprovalRequests among `messages`."""
    return [
        m["params"]["payload"]
        for m in messages
        if m.get("method") == "request" and m["params"]["type"] == "ApprovalRequest"
    ]


def approve(message: dict[str, Any]) -> dict[str, Any]:
    return {"request_id": message["params"]["payload"]["id"], "response": "approve"}


def answering(response: str, feedback: str = "") -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(message: dict[str, Any]) -> dict[str, Any]:
        result = {"request_id": message["params"]["payload"]["id"], "response": response}
        if feedback:
            result["feedback"] = feedback
        return result

    return answer


def run_turn(wire: WireProcess, text: str = "go", answer: Any = approve) -> tuple[list[dict[str, Any]], Any]:
    """One prompt; approval requests answered by `answer`; returns (messages, result)."""
    messages, response = wire.prompt(text, answer=answer)
    assert "result" in response, response
    return messages, response["result"]
