"""The web UI's fold (src/soulwire/server/static/js/fold.js) merges streamed parts as
`soulwire.wire.fold` does. tests/js/fold_vectors.json holds event sequences with what the Python
fold makes of them; this test keeps the file equal to the Python fold, and tests/js/fold.test.js
checks the JavaScript fold against the same file, so the two cannot drift apart.

After a change to the vectors or to the Python fold: `SOULWIRE_WRITE_VECTORS=1 pytest <this file>`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from soulwire.wire.fold import assemble, fold
from soulwire.wire.messages import (
    ApprovalRequest,
    ApprovalResponse,
    StatusUpdate,
    StepBegin,
    StepRetry,
    SubagentEvent,
    ToolResult,
    TurnBegin,
    TurnEnd,
    envelope,
)
from soulwire.wire.types import (
    FunctionCall,
    ImageURLPart,
    MediaURL,
    TextPart,
    ThinkPart,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    ToolReturnValue,
    WireModel,
)

VECTORS_FILE = Path(__file__).resolve().parents[1] / "js" / "fold_vectors.json"


def _call(call_id: str, name: str, arguments: str | None) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def _sub_event(message: WireModel) -> SubagentEvent:
    return SubagentEvent(
        parent_tool_call_id="a1", agent_id="sub-1", subagent_type="coder", event=envelope(message)
    )


def _turn(*body: WireModel) -> list[WireModel]:
    return [TurnBegin(user_input="do it"), StepBegin(n=1), *body, TurnEnd()]


VECTORS: dict[str, list[WireModel]] = {
    "text chunks merge": [
        TextPart(text="Hel"),
        TextPart(text="lo"),
        TextPart(text=""),
        TextPart(text=" there"),
    ],
    "an event ends a text run": [TextPart(text="a"), StatusUpdate(context_usage=0.5), TextPart(text="b")],
    "thinking then text then thinking": [
        ThinkPart(think="hmm"),
        ThinkPart(think=" ok"),
        TextPart(text="answer"),
        ThinkPart(think="more"),
    ],
    "a signature closes a thinking run": [
        ThinkPart(think="one"),
        ThinkPart(think=" two", encrypted="sig-1"),
        ThinkPart(think="three"),
        ThinkPart(think="", encrypted="sig-2"),
        ThinkPart(think="four"),
    ],
    "a tool call gathers its argument fragments": [
        TextPart(text="Running it."),
        _call("c1", "Shell", None),
        ToolCallPart(arguments_part='{"command": '),
        ToolCallPart(arguments_part=None),
        ToolCallPart(arguments_part='"ls"}'),
        _call("c2", "ReadFile", '{"path": "a.txt"}'),
    ],
    "a call with no arguments and empty fragments": [
        _call("c1", "Now", None),
        ToolCallPart(arguments_part=""),
        _call("c2", "Empty", ""),
        ToolCallPart(arguments_part=None),
    ],
    "a lone fragment belongs to the latest call": [
        _call("c1", "Shell", '{"comm'),
        StatusUpdate(context_usage=0.1),
        ToolCallPart(arguments_part='and": "pwd"}'),
        TextPart(text="between"),
        ToolCallPart(arguments_part=""),
        ToolCallPart(arguments_part=None),
    ],
    "a fragment before any call": [ToolCallPart(arguments_part="orphan"), TextPart(text="x")],
    "media between text": [
        TextPart(text="look: "),
        ImageURLPart(image_url=MediaURL(url="data:image/png;base64,AAAA")),
        TextPart(text="done"),
    ],
    "a whole turn with a tool, an approval, a retry and two steps": _turn(
        ThinkPart(think="plan"),
        TextPart(text="I will "),
        TextPart(text="list."),
        _call("c1", "Shell", ""),
        ToolCallPart(arguments_part='{"command": "ls"}'),
        ApprovalRequest(id="r1", tool_call_id="c1", sender="Shell", action="run", description="ls"),
        ApprovalResponse(request_id="r1", response="approve"),
        ToolResult(tool_call_id="c1", return_value=ToolReturnValue(is_error=False, output="a.txt\n")),
        StatusUpdate(token_usage=TokenUsage(input_other=100, output=20), context_usage=0.25),
        StepBegin(n=2),
        StepRetry(n=2, next_attempt=2, max_attempts=3, wait_s=0.5, error_type="rate_limit", status_code=429),
        TextPart(text="There is "),
        TextPart(text="a.txt."),
        StatusUpdate(token_usage=TokenUsage(input_other=130, output=5, input_cache_read=7)),
    ),
    "a sub-agent's events and a rejected call": _turn(
        _call("a1", "Agent", '{"prompt": "look"}'),
        _sub_event(TurnBegin(user_input="look")),
        _sub_event(TextPart(text="sub ")),
        _sub_event(TextPart(text="says")),
        _sub_event(StatusUpdate(token_usage=TokenUsage(input_other=40, output=10))),
        _sub_event(TurnEnd()),
        ToolResult(tool_call_id="a1", return_value=ToolReturnValue(is_error=False, output="looked")),
        _call("c2", "Shell", '{"command": "rm -r /"}'),
        ToolResult(
            tool_call_id="c2",
            return_value=ToolReturnValue(is_error=True, message="The tool call is rejected by the user."),
        ),
        _call("c3", "Shell", '{"command": "sleep 100"}'),
    ),
}


def _payloads(messages: list[Any]) -> list[Any]:
    return [m.model_dump(mode="json") for m in messages]


def vectors() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, messages in VECTORS.items():
        parts, calls = assemble(messages)
        out.append(
            {
                "name": name,
                "events": [envelope(m) for m in messages],
                "fold": [envelope(m) for m in fold(messages)],
                "assemble": {"parts": _payloads(parts), "calls": _payloads(calls)},
            }
        )
    return out


def test_the_vectors_file_is_what_the_python_fold_makes_of_its_events() -> None:
    text = json.dumps({"vectors": vectors()}, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("SOULWIRE_WRITE_VECTORS") == "1":
        VECTORS_FILE.write_text(text, encoding="utf-8")
    assert VECTORS_FILE.read_text(encoding="utf-8") == text, (
        f"{VECTORS_FILE} is not what the Python fold makes of its events: "
        "rewrite it with SOULWIRE_WRITE_VECTORS=1 and check the JavaScript fold against it (npm test)"
    )
