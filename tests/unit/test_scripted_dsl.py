"""The echo DSL of the offline providers (spec §11.2)."""

from __future__ import annotations

import json

import anyio
import pytest

from soulwire.llm.errors import APIConnectionError, APIStatusError, APITimeoutError, ProviderError
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.scripted import ScriptedEchoProvider, ScriptError, load_scripts, parse_script
from soulwire.wire.types import TextPart, ThinkPart, TokenUsage, ToolCall, ToolCallPart


def test_parts_quotes_and_spacing():
    script = parse_script("# comment\n```\necho\ntext:  world\ntext: 'quoted'\nthink: \"hmm\"\nTEXT: caps")
    assert script.parts == [TextPart(text=" world"), TextPart(text="quoted"), ThinkPart(think="hmm"),
                            TextPart(text="caps")]  # fmt: skip


def test_tool_calls_in_both_syntaxes_and_parts():
    script = parse_script(
        'tool_call: {"id": "a", "name": "Shell", "arguments": "{}"}\n'
        "tool_call: id=b name=Glob\n"
        'tool_call: {"id": "c", "function": {"name": "X", "arguments": null}}\n'
        'tool_call_part: {"arguments_part": "{\\"x\\""}\n'
        "tool_call_part: [1, 2]\n"
        "tool_call_part: null\n"
        "tool_call_part: raw text"
    )
    calls = [p for p in script.parts if isinstance(p, ToolCall)]
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("a", "Shell", "{}"), ("b", "Glob", None), ("c", "X", None)]  # fmt: skip
    parts = [p.arguments_part for p in script.parts if isinstance(p, ToolCallPart)]
    assert parts == ['{"x"', "[1,2]", None, "raw text"]


def test_id_usage_and_errors():
    script = parse_script(
        'id: m1\nusage: {"input_other": 5, "output": 2}\ntext: x\nusage: input_other=7 output=1'
    )
    assert script.message_id == "m1"
    assert script.usage == TokenUsage(input_other=7, output=1)
    assert isinstance(parse_script("error: 429 slow down").error, APIStatusError)
    assert parse_script("error: 503").error.status_code == 503  # type: ignore[union-attr]
    assert isinstance(parse_script("error: connection boom").error, APIConnectionError)
    assert isinstance(parse_script("error: timeout").error, APITimeoutError)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("bad line without colon", "Invalid echo DSL at line 1: 'bad line without colon'"),
        ("text: a\nwhat: b", "Unknown echo DSL kind 'what' at line 2"),
        ("id: only", "no streamable parts"),
        ("tool_call: {}", "Invalid echo DSL at line 1"),
        ("tool_call: id=a name=b arguments=5x", None),
    ],
)
def test_malformed_scripts(script: str, message: str | None):
    if message is None:
        parse_script(script)  # a string argument is fine
        return
    with pytest.raises(ScriptError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_script(script)


def test_load_scripts_json_and_separated_text(tmp_path):
    json_file = tmp_path / "s.json"
    json_file.write_text(json.dumps(["text: a", "text: b"]))
    assert load_scripts({"KIMI_SCRIPTED_ECHO_SCRIPTS": str(json_file)}) == ["text: a", "text: b"]
    text_file = tmp_path / "s.txt"
    text_file.write_text("text: a\n---\ntext: b\n---\n\n")
    assert load_scripts({"SOULWIRE_SCRIPTED_ECHO_SCRIPTS": str(text_file)}) == ["text: a", "text: b"]
    with pytest.raises(ScriptError):
        load_scripts({})


def test_provider_pops_one_script_per_call_and_reports_exhaustion():
    provider = ScriptedEchoProvider(["id: x\ntext: one\nusage: output=3", "error: 500 boom"])

    async def collect() -> tuple[list[object], StreamResult]:
        result = StreamResult()
        parts = [p async for p in provider.stream(ChatRequest("", []), result)]
        return parts, result

    parts, result = anyio.run(collect)
    assert parts == [TextPart(text="one")]
    assert result.message_id == "x" and result.usage == TokenUsage(output=3)
    with pytest.raises(APIStatusError):
        anyio.run(collect)
    with pytest.raises(ProviderError, match="exhausted at turn 3"):
        anyio.run(collect)


def test_an_error_with_a_usage_line_reports_the_usage_of_the_failed_call():
    provider = ScriptedEchoProvider(
        ["error: 400 context length exceeded\nusage: input_other=1200", "error: 503"]
    )

    async def failed() -> StreamResult:
        result = StreamResult()
        with pytest.raises(ProviderError):
            async for _ in provider.stream(ChatRequest("", []), result):
                pass
        return result

    assert anyio.run(failed).usage == TokenUsage(input_other=1200)
    assert anyio.run(failed).usage is None  # no usage line: the failed call reported none
