"""Mid-session controls: what the engine is, steer a running turn, interrupt it, plan mode,
and switching the model between turns.

    python examples/controls.py            # offline: scripted model, plus an `echo` model
    python examples/controls.py --real     # your configured model(s)
"""

from __future__ import annotations

import asyncio
import sys

from offline import call, session_options

import soulwire.sdk as sdk

DEMO_REPLIES = [
    call("c1", "wait_for_ci", {}),
    "text: CI is green, and I kept the change small as you asked.",
]
session_ref: list[sdk.Session] = []


@sdk.tool
async def wait_for_ci() -> str:
    """Wait for the CI run (while it runs, the user steers the agent)."""
    await session_ref[0].steer("keep the change small")
    return "CI passed"


async def main() -> None:
    options = sdk.Options(
        **session_options(DEMO_REPLIES, __doc__ or "", echo_model=True), tools=[wait_for_ci]
    )
    async with sdk.Session(options) as session:
        session_ref.append(session)
        info = session.get_server_info()
        hooks = len(info.hook_events)
        print(f"engine: {info.name} {info.version}, Wire {info.protocol_version}, hooks: {hooks}")

        async for message in session.query("Fix the build and wait for CI."):
            if isinstance(message, sdk.AssistantText):
                print(f"assistant: {message.text}")

        print(f"plan mode: {await session.set_plan_mode(True)} -> {await session.set_plan_mode(False)}")

        again = "Wait for CI again."
        if "--real" not in sys.argv:  # offline: switch to the `echo` model, which plays the prompt
            pid = session.pid
            await session.set_model("echo")  # in place (an engine without Wire `set_model`: restarted)
            answer = await session.prompt("text: Hello from the echo model.")
            print(f"after set_model: {answer.final_text!r} (same engine: {session.pid == pid})")
            again = call("c2", "wait_for_ci", {})

        turn = session.prompt(again)
        async for event in turn:
            if type(event).__name__ == "ToolCall":
                await session.interrupt()  # stop the turn (Escape in a UI)
        print(f"interrupted turn: {turn.result.status}")


if __name__ == "__main__":
    asyncio.run(main())
