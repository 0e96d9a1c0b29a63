"""`--print` and background tasks: a one-shot run ends with its process, and so would the
background commands and sub-agents its turn started. So after the prompt, print mode waits for
them (the reference's behaviour), and each time some have ended it runs one more turn for the
model to take in their results; a task still at work when the wait runs out is stopped, and the
model is told so in a last turn. Unlike the reference, the wait wakes when a task ends rather
than polling every second."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio

from soulwire.llm.errors import LLMNotSet, LLMNotSupported, ProviderError
from soulwire.tools.builtin.background import BackgroundTasks

TASKS_ENDED = "<system-reminder>Background tasks have completed. Process their results.</system-reminder>"


def _stopped_reminder(cap: int, lines: list[str]) -> str:
    return (
        "<system-reminder>\n"
        f"Background tasks were still running after the {cap}s wait limit and were stopped:\n"
        + "\n".join(lines)
        + "\nSummarize what was done, tell the user what did not finish, then conclude.\n"
        "</system-reminder>"
    )


async def wait_for_background(
    tasks: BackgroundTasks, ceiling_s: int, run_turn: Callable[[str], Awaitable[object]]
) -> str | None:
    """Wait for the session's background tasks, with a turn (`run_turn(text)`) whenever some
    ended. The wait lasts at most the longest time limit among the tasks running when it
    starts, and never more than `ceiling_s`. Returns None, or, when it ran out and tasks had
    to be stopped, what to tell the person (the run did not finish its work)."""
    running = tasks.ending_with_session()  # (not the commands `keep_alive_on_exit` leaves running)
    cap = min(max((t.timeout_s for t in running), default=ceiling_s), ceiling_s)
    deadline = anyio.current_time() + cap
    while True:
        if tasks.has_notices:  # checked before the clock: a result that came in is not lost
            await _turn_or_drop(tasks, run_turn, TASKS_ENDED)
            continue
        if not tasks.ending_with_session():
            return None
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            break
        with anyio.move_on_after(remaining):
            await tasks.wait_for_an_end()
    stuck = tasks.ending_with_session()
    for task in stuck:
        tasks.request_stop(task, f"--print stopped waiting after {cap}s")
    with anyio.move_on_after(tasks.limits.kill_grace_s + 1):
        while any(t.active for t in stuck):
            await tasks.wait_for_an_end()
    lines = [
        f"  - {t.id}: {t.description} ({'stopped' if not t.active else 'still stopping'})" for t in stuck
    ]
    tasks.take_notices()  # their "stopped" notices: the reminder below says it once, in full
    await _turn_or_drop(tasks, run_turn, _stopped_reminder(cap, lines))
    named = ", ".join(f"{t.id} ({t.description})" for t in stuck)
    return f"timed out waiting for background tasks ({cap}s); stopped {len(stuck)}: {named}"


async def _turn_or_drop(
    tasks: BackgroundTasks, run_turn: Callable[[str], Awaitable[object]], text: str
) -> None:
    """One turn for `text`. The prompt's own turn succeeded: a provider failure here is told on
    stderr, not made the run's result, and the notices it could not deliver are dropped (the
    wait would otherwise try them again and again)."""
    try:
        await run_turn(text)
    except (ProviderError, LLMNotSet, LLMNotSupported) as exc:
        sys.stderr.write(f"soulwire: could not give the background tasks' results to the model: {exc}\n")
        tasks.take_notices()


__all__ = ["TASKS_ENDED", "wait_for_background"]
