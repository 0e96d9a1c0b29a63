"""Closing a turn cut short, as pure data: the wire messages that end an open turn (flows'
nested turns and sub-agents' included) and the context's closing (idempotent)."""

from __future__ import annotations

from typing import Any

from soulwire.engine.context import Context, interrupted_note
from soulwire.engine.recovery import close_interrupted_turn
from soulwire.llm.message import Message
from soulwire.sessions.interrupted import close_open_turn
from soulwire.sessions.memory import MemoryBackend
from soulwire.wire.messages import envelope
from soulwire.wire.types import FunctionCall, ToolCall

WHY = "interrupted: the engine stopped before this call finished"


def m(kind: str, **payload: Any) -> dict[str, Any]:
    return {"type": kind, "payload": payload}


def call(call_id: str) -> dict[str, Any]:
    return m("ToolCall", type="function", id=call_id, function={"name": "Shell", "arguments": "{}"})


def sub(event: dict[str, Any], agent: str = "a1") -> dict[str, Any]:
    return m("SubagentEvent", parent_tool_call_id="c2", agent_id=agent, subagent_type="coder", event=event)


def kinds(messages: list[Any]) -> list[str]:
    return [envelope(x)["type"] for x in messages]


def test_a_closed_turn_needs_nothing():
    records = [m("TurnBegin", user_input="a"), m("StepBegin", n=1), call("c1"), m("TurnEnd")]
    assert close_open_turn(records) is None  # (its call had no result, but the turn ended)


def test_an_open_turn_gets_results_an_interruption_and_its_ends():
    records = [
        m("TurnBegin", user_input="old"),
        m("TurnEnd"),
        m("TurnBegin", user_input="flow"),
        m("TurnBegin", user_input="inner"),  # a flow's nested turn
        m("StepBegin", n=1),
        call("c1"),
        call("c2"),
        m("ToolResult", tool_call_id="c1", return_value={"is_error": False, "output": "", "message": ""}),
        sub(m("TurnBegin", user_input="look")),
        sub(m("StepBegin", n=1)),
        sub(m("CompactionBegin")),
    ]
    closing = close_open_turn(records)
    assert closing is not None and closing.subagents == ["a1"]
    assert kinds(closing.messages) == [
        "SubagentEvent", "SubagentEvent", "SubagentEvent",  # CompactionEnd, StepInterrupted, TurnEnd
        "ToolResult", "StepInterrupted", "Notification", "TurnEnd", "TurnEnd",
    ]  # fmt: skip
    inner = [envelope(x)["payload"]["event"]["type"] for x in closing.messages[:3]]
    assert inner == ["CompactionEnd", "StepInterrupted", "TurnEnd"]
    result = envelope(closing.messages[3])["payload"]
    assert result["tool_call_id"] == "c2" and result["return_value"]["message"] == WHY


def test_closing_the_context_and_the_record_is_done_once():
    store = MemoryBackend().open("s")
    context = Context(store, "prompt")
    calls = [ToolCall(id="c1", function=FunctionCall(name="Shell", arguments="{}"))]
    context.append(
        Message(role="user", content="do A"), Message(role="assistant", content="", tool_calls=calls)
    )
    for record in (m("TurnBegin", user_input="do A"), m("StepBegin", n=1), call("c1")):
        store.record_wire(record)
    assert close_interrupted_turn(store, context) == []
    assert close_interrupted_turn(store, Context(store, "prompt")) == []  # opened again: nothing more
    history = Context(store, "prompt").history
    assert [x.role for x in history] == ["user", "assistant", "tool", "user"]
    assert history[-1].text() == interrupted_note("the engine stopped").text()
    assert [r["type"] for r in store.wire_records()][-4:] == [
        "ToolResult", "StepInterrupted", "Notification", "TurnEnd",
    ]  # fmt: skip
    history.append(Message(role="user", content="do B"))
    view = Context(store, "prompt")
    view.history = history
    assert [x.role for x in view.for_model()] == ["user", "assistant", "tool", "user", "user"]


def test_the_approvals_left_waiting_are_answered_once_and_forgotten():
    store = MemoryBackend().open("s")
    store.save_state({"custom_title": "t", "pending_approvals": ["r1", "r2"]})
    for record in (m("TurnBegin", user_input="do A"), m("StepBegin", n=1), call("c1")):
        store.record_wire(record)
    close_interrupted_turn(store, Context(store, "prompt"))
    close_interrupted_turn(store, Context(store, "prompt"))  # opened again: nothing more
    closing = list(store.wire_records())[3:]
    assert [r["type"] for r in closing] == [
        "ApprovalResponse", "ApprovalResponse", "ToolResult", "StepInterrupted", "Notification", "TurnEnd",
    ]  # fmt: skip
    assert [(r["payload"]["request_id"], r["payload"]["response"]) for r in closing[:2]] == [
        ("r1", "reject"),
        ("r2", "reject"),
    ]
    assert store.load_state() == {"custom_title": "t"}  # answered: no longer waiting


def test_approvals_kept_with_their_calls_are_answered_by_a_resume_that_closes_the_turn():
    """The state keeps `{id, tool_call_id}` for each waiting approval (a host that continues the
    turn asks them again: engine/recovery.py); the CLI's resume closes the turn and answers them."""
    store = MemoryBackend().open("s")
    store.save_state({"pending_approvals": [{"id": "r1", "tool_call_id": "c1"}]})
    for record in (m("TurnBegin", user_input="do A"), m("StepBegin", n=1), call("c1")):
        store.record_wire(record)
    close_interrupted_turn(store, Context(store, "prompt"))
    closing = list(store.wire_records())[3:]
    assert [r["type"] for r in closing][:2] == ["ApprovalResponse", "ToolResult"]
    assert closing[0]["payload"]["request_id"] == "r1" and store.load_state() == {}
