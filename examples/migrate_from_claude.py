"""The program of docs/sdk-from-claude.md, written with `soulwire.sdk`: a reviewer that
counts TODOs with an in-process tool, may not touch `.env`, has a permission callback,
a budget, and a follow-up question in the same session.

    python examples/migrate_from_claude.py            # offline, scripted model
    python examples/migrate_from_claude.py --real     # your configured model
"""

from __future__ import annotations

import asyncio
from typing import Any

from offline import call, session_options

import soulwire.sdk as sdk

DEMO_REPLIES = [
    call("c1", "count_todos", {"path": "app.py"}) + "\nusage: input_other=900 output=40",
    call("c2", "Shell", {"command": "cat .env"}) + "\nusage: input_other=950 output=20",
    "text: app.py has 2 TODOs; I did not look at .env.\nusage: input_other=1000 output=30",
    "text: Start with the TODO in the parser.\nusage: input_other=1100 output=15",
]


@sdk.tool
def count_todos(path: str) -> str:
    """Count the TODO markers in a file of the project."""
    return "2"  # offline stand-in: a real tool would read `path`


async def no_env(event: sdk.HookEvent) -> sdk.Deny | None:
    if ".env" in str(event.tool_input or {}):
        return sdk.Deny("the .env file is off limits")
    return None


def can_use_tool(name: str, tool_input: dict[str, Any] | None, context: sdk.ToolPermissionContext):
    return sdk.Deny("read-only review") if name in ("WriteFile", "StrReplaceFile") else sdk.Allow()


async def main() -> None:
    options = sdk.Options(
        **session_options(DEMO_REPLIES, __doc__ or ""),
        tools=[count_todos],
        hooks=[sdk.Hook("PreToolUse", no_env, matcher="Shell|ReadFile")],
        can_use_tool=can_use_tool,
        max_turns=10,
        max_budget_usd=0.50,
        prices={"*": sdk.ModelPrice(input=3.0, output=15.0)},
    )
    async with sdk.Session(options) as session:  # ClaudeSDKClient
        for question in ("Review app.py.", "Which one first?"):
            async for message in session.query(question):
                match message:
                    case sdk.AssistantText(text=text):
                        print(f"assistant: {text}")
                    case sdk.ToolUse(name=name, input=tool_input):
                        print(f"tool: {name} {tool_input}")
                    case sdk.ResultMessage() as result:
                        cost = result.cost_usd or 0.0
                        print(f"done: {result.stop_reason}, ${cost:.4f}, session {bool(result.session_id)}")
                    case _:
                        pass


if __name__ == "__main__":
    asyncio.run(main())
