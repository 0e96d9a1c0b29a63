"""Stored sessions: list, read the history (typed), fork from an earlier turn, resume,
continue, delete. `ServerSessions(url, token)` has the same methods for a `soulwire serve`.

    python examples/sessions.py            # offline, scripted model
    python examples/sessions.py --real     # your configured model (touches your sessions!)
"""

from __future__ import annotations

import asyncio

from offline import session_options

import soulwire.sdk as sdk

# Offline, each engine process replays these from the start (the scripted model keeps no memory).
DEMO_REPLIES = ["text: Use a dict.", "text: A list of (name, age) tuples, sorted."]


async def main() -> None:
    options = sdk.Options(**session_options(DEMO_REPLIES, __doc__ or ""))
    async with sdk.Session(options) as session:
        await session.prompt("How do I map names to ages?")
        await session.prompt("And if I need them in order?")

    stored = sdk.LocalSessions(options)
    for found in await stored.list():
        print(f"session {found.id[:8]}: {found.title!r}, {found.turns} turns")
    (original,) = await stored.list()
    for turn in await stored.history(original.id):
        answer = " ".join(m.text for m in turn.messages if isinstance(m, sdk.AssistantText))
        print(f"  turn {turn.number}: {turn.user_input!r} -> {answer!r}")

    fork = await stored.fork(original.id, turn=1, title="the other way")
    print(f"forked after turn 1: {fork.title!r}, {fork.turns} turn")
    async with stored.resume(fork.id) as branch:
        await branch.prompt("What if I only need the names?")
    async with stored.continue_last() as latest:  # the most recently used session: the branch
        await latest.prompt("Thanks!")
    print(f"  branch history: {[turn.user_input for turn in await stored.history(fork.id)]}")
    print(f"  original history: {[turn.user_input for turn in await stored.history(original.id)]}")

    await stored.delete(fork.id)
    print(f"after deleting the fork: {[s.title for s in await stored.list()]}")


if __name__ == "__main__":
    asyncio.run(main())
