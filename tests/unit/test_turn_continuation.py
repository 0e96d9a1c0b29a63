"""Which open turn a host that takes a session over continues (engine/recovery.py), as pure
data on a store: only one waiting for approvals, with the model's reply complete in both
records and nothing else open; everything else is closed as before."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_turn_closing import call, m, sub

from soulwire.engine.context import Context
from soulwire.engine.recovery import plan_continuation
from soulwire.llm.message import Message
from soulwire.sessions.memory import MemoryBackend, MemorySessionStore
from soulwire.wire.types import FunctionCall, ToolCall

OK = {"is_error": False, "output": "done", "message": ""}


def session(records: list[dict[str, Any]], pending: Any, *, reply: bool = True) -> MemorySessionStore:
    store = MemoryBackend().open("s")
    context = Context(store, "prompt")
    context.append(Message(role="user", content="do A"))
    if reply:
        calls = [ToolCall(id=i, function=FunctionCall(name="Shell", arguments="{}")) for i in ("c1", "c2")]
        context.append(Message(role="assistant", content="two", tool_calls=calls))
    store.save_state({"pending_approvals": pending})
    for record in records:
        store.record_wire(record)
    return store


WAITING = [m("TurnBegin", user_input="do A"), m("StepBegin", n=1), call("c1"), call("c2")]
ASKED = [{"id": "r2", "tool_call_id": "c2"}]


def test_a_turn_waiting_for_an_approval_is_continued_with_what_finished_kept():
    records = [*WAITING, m("ToolResult", tool_call_id="c1", return_value=OK)]
    store = session(records, ASKED)
    plan = plan_continuation(store, Context(store, "prompt"))
    assert plan is not None and plan.step == 1 and [c.id for c in plan.calls] == ["c1", "c2"]
    assert plan.asked == {"c2": "r2"} and list(plan.results) == ["c1"] and plan.interrupted == []
    running = session(WAITING, ASKED)  # c1 neither finished nor waiting: it was running
    plan = plan_continuation(running, Context(running, "prompt"))
    assert plan is not None and plan.interrupted == ["c1"]


@pytest.mark.parametrize(
    ("name", "records", "pending", "reply"),
    [
        ("no approval waited", WAITING, [], True),
        ("an older session's bare ids", WAITING, ["r2"], True),
        ("a sub-agent's approval", WAITING, [{"id": "r2", "tool_call_id": "c2", "agent_id": "a1"}], True),
        ("the model's reply in flight", [*WAITING[:2], call("c1")], ASKED, False),
        ("a sub-agent ran in the step", [*WAITING, sub(m("TurnBegin", user_input="x"))], ASKED, True),
        ("a compaction open", [*WAITING[:2], m("CompactionBegin"), call("c1"), call("c2")], ASKED, True),
        ("a flow's nested turn", [m("TurnBegin", user_input="flow"), *WAITING], ASKED, True),
        ("a closed turn", [*WAITING, m("TurnEnd")], ASKED, True),
        ("other calls on record", [*WAITING[:3], call("c3")], ASKED, True),
    ],
)
def test_any_other_open_turn_is_left_to_be_closed(name: str, records: Any, pending: Any, reply: bool):
    store = session(records, pending, reply=reply)
    assert plan_continuation(store, Context(store, "prompt")) is None, name
