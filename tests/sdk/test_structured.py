"""Structured output through `query()` against the real engine (scripted model): a pydantic
model, a JSON Schema, the one retry with the validation error, and early refusal of bad schemas."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import soulwire.sdk as sdk
from soulwire.sdk.structured import OutputSpec
from soulwire.wire.messages import TurnBegin

from .conftest import Engine

pytestmark = pytest.mark.anyio

COUNT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


class Weather(BaseModel):
    city: str
    celsius: int


def text(value: object) -> str:
    return "text: " + json.dumps(value)


async def run(*args: object, **kwargs: object) -> tuple[list[sdk.Message], sdk.ResultMessage]:
    messages = [m async for m in sdk.query(*args, **kwargs)]  # type: ignore[arg-type]
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage)
    return messages, result


async def test_pydantic_model_output(soulwire: Engine):
    options = soulwire.options(text({"city": "Oslo", "celsius": 4}), output_format=Weather)
    _, result = await run("weather in Oslo?", **options)
    assert result.stop_reason == "finished" and result.num_turns == 1
    assert result.structured_output == Weather(city="Oslo", celsius=4)


async def test_schema_mismatch_is_retried_once_with_the_error(soulwire: Engine):
    options = soulwire.options(
        text({"n": "three"}) + "\nusage: input_other=10 output=2",
        text({"n": 3}) + "\nusage: input_other=20 output=3",
        output_format=COUNT_SCHEMA,
        session_id="structured-1",
    )
    messages, result = await run("count", **options)
    texts = [m.text for m in messages if isinstance(m, sdk.AssistantText)]
    assert texts == ['{"n": "three"}', '{"n": 3}']  # both turns streamed
    assert result.stop_reason == "finished" and result.structured_output == {"n": 3}
    assert result.num_turns == 2 and result.num_steps == 2
    assert (result.usage.input_other, result.usage.output) == (30, 5)  # both turns counted
    # what the engine was sent: the schema with the prompt, then the error with the retry
    async with sdk.Session(**soulwire.options(session_id="structured-1")) as session:
        prompts = [str(e.user_input) async for e in session.replay() if isinstance(e, TurnBegin)]
    assert len(prompts) == 2
    assert (
        prompts[0].startswith("count\n\nWhen you are done") and '"additionalProperties": false' in prompts[0]
    )
    assert prompts[1].startswith("Your reply did not match the required JSON Schema: at n: 'three' is not")


async def test_second_mismatch_is_an_error_result(soulwire: Engine):
    options = soulwire.options(
        "text: not json at all", text({"n": 1, "extra": True}), output_format=COUNT_SCHEMA
    )
    _, result = await run("count", **options)
    assert result.stop_reason == "error" and result.num_turns == 2
    assert isinstance(result.error, sdk.StructuredOutputError)
    assert "Additional properties are not allowed" in str(result.error)
    assert result.structured_output is None


def test_parse_accepts_a_fenced_block_and_explains_failures():
    spec = OutputSpec(Weather)
    assert spec.parse('Here:\n```json\n{"city": "Rome", "celsius": 20}\n```') == Weather(
        city="Rome", celsius=20
    )
    with pytest.raises(sdk.StructuredOutputError, match="celsius"):
        spec.parse('{"city": "Rome"}')
    with pytest.raises(sdk.StructuredOutputError, match="not JSON"):
        spec.parse("sunny")
    assert spec.retry_prompt(sdk.StructuredOutputError("at celsius: missing")).startswith(
        "Your reply did not match the required JSON Schema: at celsius: missing"
    )
    assert '"celsius"' in spec.instruction()


def test_bad_output_format_is_refused_early():
    with pytest.raises(sdk.ConfigurationError, match="not a valid JSON Schema"):
        sdk.Options(output_format={"type": "no-such-type"})
    with pytest.raises(sdk.ConfigurationError, match="pydantic model class or a JSON Schema"):
        sdk.Options(output_format=42)
