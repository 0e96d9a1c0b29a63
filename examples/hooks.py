"""Hooks: Python callables at the engine's hook points that observe, block or amend.

python examples/hooks.py            # offline, scripted model
python examples/hooks.py --real     # your configured model
"""

from __future__ import annotations

import asyncio

from offline import call, session_options

import soulwire.sdk as sdk

DEMO_REPLIES = [
    call("c1", "Shell", {"command": "cat .env"}) + "\n" + call("c2", "Shell", {"command": "ls"}),
    "text: I could not read .env; the listing ran.",
    "text: Tests written as well.",
]
audit: list[str] = []


async def guard(event: sdk.HookEvent) -> sdk.Allow | sdk.Deny | None:
    """Before a Shell call: secrets stay private, every command runs quietly."""
    command = (event.tool_input or {}).get("command", "")
    if ".env" in command:
        return sdk.Deny("reading .env is not allowed")
    return sdk.Allow(updated_input={"command": f"{command} 2>/dev/null"})  # runs the amended command


def record(event: sdk.HookEvent) -> None:
    """After any tool: an audit line (a sync hook runs in a worker thread)."""
    audit.append(
        f"{event.tool_name}: {event.tool_input} -> {str(event.data.get('tool_output', '')).strip()!r}"
    )


async def keep_going(event: sdk.HookEvent) -> sdk.Deny | None:
    """When the agent would stop: once, ask for tests too (Deny = do not stop yet)."""
    return None if event.data.get("stop_hook_active") else sdk.Deny("Now write the tests.")


async def main() -> None:
    options = sdk.Options(
        **session_options(DEMO_REPLIES, __doc__ or ""),
        yolo=True,
        hooks=[
            sdk.Hook("PreToolUse", guard, matcher="^Shell$"),
            sdk.Hook("PostToolUse", record),
            sdk.Hook("Stop", keep_going),
        ],
    )
    async for message in sdk.query("Show me the config and the files.", options):
        match message:
            case sdk.ToolResultMessage(is_error=True, message=why):
                print(f"blocked: {why}")
            case sdk.AssistantText(text=text):
                print(f"assistant: {text}")
            case sdk.ResultMessage(stop_reason=reason):
                print(f"result: {reason}")
            case _:
                pass
    for line in audit:
        print(f"audit: {line}")


if __name__ == "__main__":
    asyncio.run(main())
