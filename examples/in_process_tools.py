"""In-process tools: a `@tool` function and an MCP server object, both served by this process.

python examples/in_process_tools.py            # offline, scripted model
python examples/in_process_tools.py --real     # your configured model
"""

from __future__ import annotations

import asyncio
from typing import Literal

from mcp.server.mcpserver import MCPServer
from offline import call, session_options

import soulwire.sdk as sdk

DEMO_REPLIES = [
    call("c1", "convert", {"value": 100, "unit": "fahrenheit"})
    + "\n"
    + call("c2", "word_count", {"text": "a b c"}),
    "text: 100 °F is 37.8 °C, and the text has 3 words.",
]


@sdk.tool
def convert(value: float, unit: Literal["celsius", "fahrenheit"]) -> str:
    """Convert a temperature to the other unit.

    Args:
        value: the temperature
        unit: the unit `value` is in
    """
    if unit == "fahrenheit":
        return f"{(value - 32) * 5 / 9:.1f} celsius"
    return f"{value * 9 / 5 + 32:.1f} fahrenheit"


text_tools = MCPServer("text")  # an MCP server defined in this process (official `mcp` SDK)


@text_tools.tool(description="Count the words of a text.")
def word_count(text: str) -> int:
    return len(text.split())


async def main() -> None:
    options = sdk.Options(
        **session_options(DEMO_REPLIES, __doc__ or ""), tools=[convert], mcp_servers={"text": text_tools}
    )
    async with sdk.Session(options) as session:
        print(f"tools the engine accepted: {', '.join(sorted(session.accepted_tools))}")
        print(f"convert's schema: {session.tools['convert'].spec()['parameters']['properties']['unit']}")
        async for message in session.query("Convert 100 F and count 'a b c'."):
            match message:
                case sdk.ToolUse(name=name, input=tool_input):
                    print(f"-> {name} {tool_input}")
                case sdk.ToolResultMessage(output=output):
                    print(f"<- {output}")
                case sdk.AssistantText(text=text):
                    print(f"assistant: {text}")
                case _:
                    pass


if __name__ == "__main__":
    asyncio.run(main())
