"""The program of docs/sdk-from-kimi.md, written with `soulwire.sdk`: the high-level
`prompt()` with auto-approval, then a low-level Session that streams Wire messages and
answers approvals itself.

    python examples/migrate_from_kimi.py            # offline, scripted model
    python examples/migrate_from_kimi.py --real     # your configured model
"""

from __future__ import annotations

import asyncio

from offline import call, session_options

import soulwire.sdk as sdk
from soulwire.wire.types import TextPart

HELLO_REPLIES = ["text: print('hello, world')"]
LIST_REPLIES = [call("c1", "Shell", {"command": "ls"}), "text: The directory is empty."]


async def main() -> None:
    # High level: one call, typed messages (kimi_agent_sdk.prompt).
    hello = sdk.Options(**session_options(HELLO_REPLIES, __doc__ or ""))
    async for message in sdk.prompt("Write a hello world program", hello, yolo=True):
        if isinstance(message, sdk.AssistantText):
            print(message.text)

    # Low level: raw Wire messages, approvals answered here (kimi_agent_sdk.Session).
    async with sdk.Session(**session_options(LIST_REPLIES, __doc__ or "")) as session:
        async for event in session.prompt("List files in the current directory"):
            match event:
                case TextPart(text=text):
                    print(text, end="", flush=True)
                case sdk.Approval() as approval:
                    print(f"[approving: {approval.description}]")
                    approval.approve()
                case _:
                    pass
        print()


if __name__ == "__main__":
    asyncio.run(main())
