"""The event bus: raw sinks see every chunk, merged sinks see folded runs (spec §3.5)."""

from __future__ import annotations

from soulwire.engine.bus import EventBus
from soulwire.wire.messages import StatusUpdate, ToolResult
from soulwire.wire.types import FunctionCall, TextPart, ThinkPart, ToolCall, ToolCallPart, WireModel, tool_ok


def run(messages: list[WireModel]) -> tuple[list[WireModel], list[WireModel]]:
    bus = EventBus()
    raw: list[WireModel] = []
    merged: list[WireModel] = []
    bus.subscribe(raw.append)
    bus.subscribe(merged.append, merged=True)
    for message in messages:
        bus.emit(message)
    bus.flush()
    return raw, merged


def test_text_and_think_runs_fold_and_raw_is_untouched():
    messages: list[WireModel] = [
        ThinkPart(think="a"),
        ThinkPart(think="b"),
        TextPart(text="x"),
        TextPart(text="y"),
    ]
    raw, merged = run(messages)
    assert raw == messages
    assert merged == [ThinkPart(think="ab"), TextPart(text="xy")]


def test_think_with_signature_closes_the_run():
    _, merged = run([ThinkPart(think="a"), ThinkPart(think="b", encrypted="sig"), ThinkPart(think="c")])
    assert merged == [ThinkPart(think="ab", encrypted="sig"), ThinkPart(think="c")]


def test_tool_call_parts_fold_into_their_call():
    call = ToolCall(id="c", function=FunctionCall(name="Shell", arguments=None))
    _, merged = run([call, ToolCallPart(arguments_part='{"a"'), ToolCallPart(arguments_part=None),
                     ToolCallPart(arguments_part=": 1}"), StatusUpdate()])  # fmt: skip
    assert isinstance(merged[0], ToolCall)
    assert merged[0].function.arguments == '{"a": 1}'
    assert isinstance(merged[1], StatusUpdate)


def test_non_mergeable_message_flushes_the_buffer_in_order():
    result = ToolResult(tool_call_id="c", return_value=tool_ok("out"))
    _, merged = run([TextPart(text="a"), result, TextPart(text="b")])
    assert merged == [TextPart(text="a"), result, TextPart(text="b")]


def test_many_chunks_fold_to_one_text():
    _, merged = run([TextPart(text=f"{i},") for i in range(5000)])
    assert len(merged) == 1
    text = merged[0].text  # type: ignore[attr-defined]
    assert text.startswith("0,1,2,") and text.endswith("4999,") and text.count(",") == 5000


def test_record_reaches_only_merged_sinks():
    bus = EventBus()
    raw: list[WireModel] = []
    merged: list[WireModel] = []
    bus.subscribe(raw.append)
    bus.subscribe(merged.append, merged=True)
    bus.emit(TextPart(text="a"))
    bus.record(StatusUpdate())
    assert raw == [TextPart(text="a")]
    assert merged == [TextPart(text="a"), StatusUpdate()]


def test_a_merge_window_delivers_growing_text_while_it_streams_but_keeps_tool_calls_whole():
    """A shared store's record is the live stream others read: a text run older than the
    window goes out as it stands (window 0: at every chunk after the first), a tool call's
    arguments still fold into their call."""
    bus = EventBus(merge_window_s=0.0)
    merged: list[WireModel] = []
    bus.subscribe(merged.append, merged=True)
    call = ToolCall(id="c1", function=FunctionCall(name="Shell", arguments='{"a'))
    for message in [TextPart(text="x"), TextPart(text="y"), TextPart(text="z"), call]:
        bus.emit(message)
    bus.emit(ToolCallPart(arguments_part='": 1}'))
    bus.flush()
    assert [m.text for m in merged[:2] if isinstance(m, TextPart)] == ["xy", "z"]
    assert len(merged) == 3 and isinstance(merged[2], ToolCall)
    assert merged[2].function.arguments == '{"a": 1}'
