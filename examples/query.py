"""`query()`: one call, typed messages, a permission callback, limits and the cost.

python examples/query.py            # offline, scripted model
python examples/query.py --real     # your configured model
"""

from __future__ import annotations

import asyncio
from typing import Any

from offline import call, session_options

import soulwire.sdk as sdk

DEMO_REPLIES = [
    "think: I should look at the files first\n"
    + call("c1", "Shell", {"command": "echo README.md"})
    + "\nusage: input_other=1200 output=40",
    call("c2", "Shell", {"command": "rm -rf /tmp/everything"}) + "\nusage: input_other=1300 output=30",
    "text: There is one file, README.md; I was not allowed to delete anything.\n"
    "usage: input_other=1400 output=25",
]


def can_use_tool(name: str, tool_input: dict[str, Any] | None, context: sdk.ToolPermissionContext):
    """Allow read-only shell commands; refuse anything that deletes, telling the model why."""
    command = (tool_input or {}).get("command", "")
    if name == "Shell" and command.startswith("rm "):
        return sdk.Deny(f"`{command}` deletes files; that is not allowed")
    return sdk.Allow()


async def main() -> None:
    options = sdk.Options(
        **session_options(DEMO_REPLIES, __doc__ or ""),
        can_use_tool=can_use_tool,
        max_turns=10,  # the engine's step limit for this prompt
        turn_timeout=120,  # seconds; the turn is cancelled after that
        prices={"*": sdk.ModelPrice(input=0.60, output=2.50)},  # USD per million tokens
        max_budget_usd=0.50,
    )
    async for message in sdk.query("What files are here? Then clean up.", options):
        match message:
            case sdk.Thinking(thinking=thinking):
                print(f"(thinking) {thinking}")
            case sdk.ToolUse(name=name, input=tool_input):
                print(f"→ {name} {tool_input}")
            case sdk.ToolResultMessage(is_error=is_error, output=output, message=note):
                print(f"← {'error' if is_error else 'ok'}: {(str(output) or note).strip()}")
            case sdk.AssistantText(text=text):
                print(f"assistant: {text}")
            case sdk.ResultMessage() as result:
                print(
                    f"result: {result.stop_reason} after {result.num_steps} steps, "
                    f"{result.usage.input} tokens in, {result.usage.output} out, "
                    f"${result.cost_usd:.6f}, limit hit: {result.limit}"
                )
            case _:
                pass  # Status updates


if __name__ == "__main__":
    asyncio.run(main())
