"""`MessageFolder.feed_many` (the batch fast path `query()` uses) gives exactly what feeding
the events one by one gives, and shows every non-chunk event to its watcher."""

from __future__ import annotations

from typing import Any

from soulwire.sdk.messages import MessageFolder
from soulwire.wire.messages import StatusUpdate, StepBegin, ToolResult
from soulwire.wire.types import FunctionCall, TextPart, ThinkPart, ToolCall, ToolCallPart, tool_ok

EVENTS: list[Any] = [
    StepBegin(n=1),
    ThinkPart(think="a"),
    ThinkPart(think="b"),
    ThinkPart(think="c", encrypted="sig"),  # a signature closes the thinking run
    ThinkPart(think="d"),
    TextPart(text="hel"),
    TextPart(text="lo"),
    ToolCall(id="t1", function=FunctionCall(name="Shell", arguments='{"comm')),
    ToolCallPart(arguments_part='and":"ls"}'),
    TextPart(text="after"),
    StatusUpdate(),
    StepBegin(n=2),
    ToolResult(tool_call_id="t1", return_value=tool_ok("x")),
    TextPart(text="bye"),
    *[TextPart(text=str(i)) for i in range(1200)],
]


def one_by_one() -> list[Any]:
    folder = MessageFolder()
    out = [m for e in EVENTS for m in folder.feed(e)]
    return out + folder.flush()


def test_feed_many_matches_feed_for_any_batching():
    expected = one_by_one()
    as_strings = [e.text if type(e) is TextPart else e for e in EVENTS]  # text_as_str=True
    assert [type(m).__name__ for m in expected][:4] == ["Thinking", "Thinking", "AssistantText", "ToolUse"]
    for size, events in [(n, e) for n in (1, 2, 3, 7, 500, len(EVENTS)) for e in (EVENTS, as_strings)]:
        folder = MessageFolder()
        watched: list[Any] = []
        out: list[Any] = []
        for start in range(0, len(events), size):
            out += folder.feed_many(events[start : start + size], watched.append)
        out += folder.flush()
        assert out == expected, size
        assert all(type(e) is not TextPart or e.text in ("hel", "after", "bye") or size == 1 for e in watched)
        assert sum(type(e) is StatusUpdate for e in watched) == 1


class _Owner:
    def _cancel_stream(self, stream: Any, *, wait_answer: bool) -> None:
        return None

    async def steer(self, user_input: Any) -> None:
        return None


def test_a_turn_that_keeps_only_strings_has_the_same_texts():
    from soulwire.sdk.turn import Turn
    from soulwire.wire.messages import StepRetry

    events: list[Any] = [
        StepBegin(n=1),
        ThinkPart(think="hm"),
        TextPart(text="void"),
        StepRetry(n=1, next_attempt=2, max_attempts=3, wait_s=0.1, error_type="timeout"),
        ThinkPart(think="ok "),
        ThinkPart(think="then"),
        TextPart(text="fin"),
        TextPart(text="al"),
        ToolCall(id="t1", function=FunctionCall(name="Shell", arguments='{"a"')),
        ToolCallPart(arguments_part=":1}"),
    ]
    full, light = Turn(_Owner(), "x"), Turn(_Owner(), "x")  # pyright: ignore[reportArgumentType]
    light.record_chunks = False
    for event in events:
        full._on_event(event)  # pyright: ignore[reportPrivateUsage]
        if type(event) is TextPart:  # as the engine link delivers it with text_as_str=True
            light._on_text(event.text)  # pyright: ignore[reportPrivateUsage]
        else:
            light._on_event(event)  # pyright: ignore[reportPrivateUsage]
    for turn in (full, light):
        (step,) = turn.steps
        assert (step.text, step.thinking, step.retries) == ("final", "ok then", 1)
        assert step.tool_calls[0].function.arguments == '{"a":1}'
    assert not any(type(e) is TextPart for e in light.steps[0].events)
