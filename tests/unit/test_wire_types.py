"""Protocol types: envelopes carry every field, unknown things are kept, legacy names load."""

from __future__ import annotations

import json

from soulwire.wire.messages import ApprovalResponse, SubagentEvent, UnknownMessage, envelope, parse_envelope
from soulwire.wire.serde import event_line
from soulwire.wire.types import TextPart, ThinkPart, ToolReturnValue, UnknownDisplayBlock


def test_fast_and_generic_event_lines_agree():
    for part in (TextPart(text='a"b\n\u2028é'), ThinkPart(think="t", encrypted="sig"), ThinkPart(think="t")):
        fast = json.loads(event_line(part))
        assert fast == {"jsonrpc": "2.0", "method": "event", "params": envelope(part)}


def test_legacy_and_unknown_messages():
    legacy = parse_envelope("ApprovalRequestResolved", {"request_id": "r", "response": "approve"})
    assert legacy == ApprovalResponse(request_id="r", response="approve")
    sub = parse_envelope(
        "SubagentEvent", {"task_tool_call_id": "t", "event": {"type": "TurnEnd", "payload": {}}}
    )
    assert isinstance(sub, SubagentEvent) and sub.parent_tool_call_id == "t"
    unknown = parse_envelope("FutureEvent", {"x": 1})
    assert isinstance(unknown, UnknownMessage) and envelope(unknown) == {
        "type": "FutureEvent",
        "payload": {"x": 1},
    }


def test_unknown_display_block_keeps_its_data():
    value = ToolReturnValue.model_validate(
        {"is_error": False, "output": "", "message": "", "display": [{"type": "chart", "points": [1, 2]}]}
    )
    block = value.display[0]
    assert isinstance(block, UnknownDisplayBlock)
    assert block.model_dump() == {"type": "chart", "data": {"points": [1, 2]}}


def test_extra_fields_survive_a_round_trip():
    part = TextPart.model_validate({"type": "text", "text": "x", "future": True})
    assert envelope(part)["payload"] == {"type": "text", "text": "x", "future": True}
