"""External tools: JSON Schema from type hints and pydantic models, invocation, result
conversion and errors; and that the real engine accepts what we generate."""

from __future__ import annotations

import json
import threading
from enum import StrEnum
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

import soulwire.sdk as sdk
from soulwire.sdk.tools import Tool, ToolError, as_tools
from soulwire.wire.types import TextPart, tool_ok

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


class Unit(StrEnum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Location(BaseModel):
    city: str = Field(description="City name")
    country: str | None = None


class Forecast(BaseModel):
    """Get the weather forecast for a place."""

    where: Location
    days: int = Field(default=1, ge=1, le=7)
    unit: Unit = Unit.celsius


def test_schema_from_type_hints_and_docstring():
    @sdk.tool
    def search(
        query: str, limit: int = 10, tags: list[str] | None = None, mode: Literal["a", "b"] = "a"
    ) -> str:
        """Search the index.

        More prose about searching.

        Args:
            query: what to look for;
                may span lines
            limit: at most this many hits

        Returns:
            The hits.
        """
        return query

    assert isinstance(search, Tool) and search.name == "search"
    assert search.description == "Search the index.\n\nMore prose about searching."
    schema = search.parameters
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["query"]["description"] == "what to look for; may span lines"
    assert props["limit"] == {
        "default": 10,
        "description": "at most this many hits",
        "title": "Limit",
        "type": "integer",
    }
    assert props["mode"]["enum"] == ["a", "b"]
    assert "title" not in schema
    assert search("x") == "x"  # the decorated name still calls the function


def test_annotated_descriptions_names_and_models():
    @sdk.tool(name="get_weather", description="Weather now")
    def weather(city: Annotated[str, Field(description="City name")], unit: Unit = Unit.celsius) -> str:
        return city

    assert weather.name == "get_weather" and weather.description == "Weather now"
    assert weather.parameters["properties"]["city"]["description"] == "City name"

    def forecast(request: Forecast) -> str:
        return request.where.city

    single = Tool.from_function(forecast)
    assert single.parameters["properties"]["where"] == {"$ref": "#/$defs/Location"}
    assert single.name == "forecast"
    assert single.description == "Get the weather forecast for a place."  # the model's docstring
    model_tool = Tool.from_model(Forecast, forecast)
    assert model_tool.name == "Forecast" and model_tool.description == "Get the weather forecast for a place."
    assert "Location" in model_tool.parameters["$defs"]


def test_bad_definitions_are_clear_errors():
    def varargs(*items: str) -> None: ...

    with pytest.raises(sdk.ToolDefinitionError, match=r"\*args"):
        Tool.from_function(varargs)
    with pytest.raises(sdk.ToolDefinitionError, match="invalid tool name"):
        Tool.from_function(lambda: None, name="has space")
    with pytest.raises(sdk.ToolDefinitionError, match="two external tools"):
        as_tools([Tool.from_function(lambda: 1, name="x"), Tool.from_function(lambda: 2, name="x")])


async def test_invocation_results_and_errors():
    calls: list[str] = []

    def sync_tool(n: int) -> dict[str, object]:
        calls.append(threading.current_thread().name)
        return {"double": n * 2}

    t = Tool.from_function(sync_tool)
    value = await t.invoke('{"n": 21}')
    assert not value.is_error and json.loads(str(value.output)) == {"double": 42}
    assert calls and calls[0] != threading.main_thread().name

    bad = await t.invoke('{"n": "many"}')
    assert (
        bad.is_error
        and bad.message.startswith("Invalid arguments")
        and bad.display[0].text == "Invalid arguments"
    )
    broken = await t.invoke("{not json")
    assert broken.is_error and "Invalid JSON" in broken.message

    async def fails(reason: str) -> str:
        raise ToolError(f"cannot: {reason}", output="partial", brief="Refused")

    value = await Tool.from_function(fails).invoke('{"reason": "no"}')
    assert value.is_error and value.message == "cannot: no" and value.output == "partial"
    assert value.display[0].text == "Refused"

    async def parts() -> list[TextPart]:
        return [TextPart(text="a"), TextPart(text="b")]

    assert (await Tool.from_function(parts).invoke(None)).output == [TextPart(text="a"), TextPart(text="b")]

    def raw() -> object:
        return tool_ok("exact", message="as is")

    assert (await Tool.from_function(raw).invoke("{}")).message == "as is"

    def positional(a: int, /, b: int) -> int:
        return a - b

    assert (await Tool.from_function(positional).invoke('{"a": 5, "b": 2}')).output == "3"

    def model_out(where: Location) -> Location:
        return where

    out = await Tool.from_function(model_out).invoke('{"city": "Oslo"}')
    assert json.loads(str(out.output)) == {"city": "Oslo", "country": None}


async def test_the_engine_accepts_generated_schemas_and_calls_model_tools(soulwire: Engine):
    got: list[Forecast] = []

    def forecast(request: Forecast) -> str:
        got.append(request)
        return f"sunny in {request.where.city} for {request.days} days ({request.unit.value})"

    @sdk.tool
    def search(query: str, limit: int = 10, tags: list[str] | None = None) -> list[str]:
        """Search."""
        return [query] * min(limit, 2)

    @sdk.tool(name="Shell")
    def fake_shell(command: str) -> str:
        """Clashes with a built-in name."""
        return command

    args = {"where": {"city": "Oslo"}, "days": 3, "unit": "fahrenheit"}
    options = soulwire.options(
        call("f1", "Forecast", args),
        call("f2", "Forecast", {"where": {"city": "Oslo"}, "days": 99}),
        "text: done",
        tools=[Tool.from_model(Forecast, forecast), search, fake_shell],
    )
    async with sdk.Session(**options) as session:
        assert sorted(session.accepted_tools) == ["Forecast", "search"]
        assert session.rejected_tools == {"Shell": "conflicts with builtin tool"}
        result = await session.prompt("weather?")
    first, second = (r.return_value for s in result.steps for r in s.tool_results)
    assert first.output == "sunny in Oslo for 3 days (fahrenheit)"
    assert got[0].unit is Unit.fahrenheit
    assert second.is_error and len(got) == 1  # the engine validated `days` against the schema
