"""One-shot use: `await soulwire.sdk.ask(...)` starts an engine, asks, returns the final
text and closes it; `soulwire.sdk.sync.ask` is the same for code without asyncio.

    python examples/one_shot.py
    python examples/one_shot.py --real
"""

from __future__ import annotations

import asyncio

from offline import session_options

import soulwire.sdk as sdk
from soulwire.sdk import sync

DEMO_REPLIES = ["think: an easy one\ntext: The answer is 42."]


async def main() -> None:
    options = session_options(DEMO_REPLIES, __doc__ or "")
    print("async:", await sdk.ask("What is six times seven?", **options))


if __name__ == "__main__":
    asyncio.run(main())
    # without asyncio (each call starts its own engine process):
    print("sync:", sync.ask("What is six times seven?", **session_options(DEMO_REPLIES, __doc__ or "")))
