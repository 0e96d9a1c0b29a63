"""External tools: plain typed Python functions (and a pydantic model) that the model can
call. The SDK registers them at `initialize`, answers the engine's tool calls, and turns
exceptions into error results the model can read.

    python examples/external_tools.py
    python examples/external_tools.py --real
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from typing import Literal

from offline import call, session_options
from pydantic import BaseModel, Field

import soulwire.sdk as sdk
from soulwire.sdk import Tool, ToolError, tool

DEMO_REPLIES = [
    call("w1", "get_weather", {"city": "Oslo", "unit": "celsius"}),
    call("t1", "create_ticket", {"title": "Umbrella stock low", "priority": "high"}),
    call("d1", "drop_database", {"name": "production"}),
    "text: It is 4 °C in Oslo; I filed ticket T-1 and did not drop the database.",
]


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: the city name
        unit: temperature unit
    """
    degrees = 4 if unit == "celsius" else 39
    return f"{city}: {degrees}° {unit}, light rain"


class Ticket(BaseModel):
    """Create a ticket in the issue tracker."""

    title: str = Field(description="one-line summary")
    priority: Literal["low", "normal", "high"] = "normal"
    labels: list[str] = Field(default_factory=list)


_ids = itertools.count(1)


async def create_ticket(ticket: Ticket) -> dict[str, str]:
    await asyncio.sleep(0)  # e.g. an HTTP call to the tracker
    return {"id": f"T-{next(_ids)}", "title": ticket.title, "priority": ticket.priority}


@tool
def drop_database(name: str) -> str:
    """Drop a database (always refused in this example)."""
    raise ToolError(f"dropping `{name}` is not allowed from an agent", brief="Refused")


async def main() -> int:
    tools = [get_weather, Tool.from_model(Ticket, create_ticket, name="create_ticket"), drop_database]
    options = session_options(DEMO_REPLIES, __doc__ or "")
    async with sdk.Session(**options, tools=tools) as session:
        print("registered:", ", ".join(session.accepted_tools))
        for name, reason in session.rejected_tools.items():
            print(f"rejected by the engine: {name} ({reason})")
        result = await session.prompt("How is the weather in Oslo? File a ticket if we need umbrellas.")
    for step in result.steps:
        for call_, outcome in zip(step.tool_calls, step.tool_results, strict=False):
            value = outcome.return_value
            status = "error" if value.is_error else "ok"
            shown = value.message or value.output
            print(f"{call_.function.name}({call_.function.arguments}) -> {status}: {shown}")
    print(result.final_text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
