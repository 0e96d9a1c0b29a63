"""A custom UI: print what the agent does while it streams — thinking, text, tool calls and
their results, approvals (asking you when a terminal is attached) and token usage.

    python examples/custom_ui.py            # offline, scripted model
    python examples/custom_ui.py --real     # your config and model
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime

from offline import call, session_options

import soulwire.sdk as sdk
from soulwire.wire.messages import StatusUpdate, StepInterrupted, StepRetry, ToolResult
from soulwire.wire.types import TextPart, ThinkPart, ToolCall

DIM, BOLD, RED, GREEN, RESET = "\033[2m", "\033[1m", "\033[31m", "\033[32m", "\033[0m"
if not sys.stdout.isatty():
    DIM = BOLD = RED = GREEN = RESET = ""

DEMO_REPLIES = [
    "think: The user wants the time; I have a tool for that.\n"
    "text: Let me check the clock.\n" + call("t1", "current_time", {"tz": "UTC"}),
    "usage: input_other=420 output=18\ntext: It is now the time shown above (UTC).",
]


@sdk.tool
def current_time(tz: str = "UTC") -> str:
    """The current date and time.

    Args:
        tz: the time zone (only UTC in this example)
    """
    return datetime.now(UTC).isoformat(timespec="seconds")


async def ask_human(approval: sdk.Approval) -> sdk.ApprovalDecision:
    if not sys.stdin.isatty():
        return sdk.ApprovalDecision.reject("nobody is at the terminal to approve this")
    answer = await asyncio.to_thread(input, f"{BOLD}Allow {approval.description}?{RESET} [y/N/a(lways)] ")
    answer = answer.strip().lower()
    if answer in ("a", "always"):
        return sdk.ApprovalDecision.approve_for_session()
    if answer in ("y", "yes"):
        return sdk.ApprovalDecision.approve()
    return sdk.ApprovalDecision.reject()


def show(event: object) -> None:
    match event:
        case ThinkPart(think=text):
            print(f"{DIM}{text}{RESET}", end="", flush=True)
        case TextPart(text=text):
            print(text, end="", flush=True)
        case ToolCall(function=function):
            print(f"\n{BOLD}→ {function.name}{RESET} {DIM}{function.arguments or ''}{RESET}")
        case ToolResult(return_value=value):
            colour = RED if value.is_error else GREEN
            summary = value.message or str(value.output)[:120]
            print(f"{colour}← {summary}{RESET}")
        case StepRetry(next_attempt=attempt, max_attempts=most, error_type=kind):
            print(f"\n{RED}(model call failed: {kind}; attempt {attempt} of {most}){RESET}")
        case StepInterrupted():
            print(f"\n{RED}(step interrupted){RESET}")
        case StatusUpdate() | sdk.Approval():
            pass  # usage is summed in the result; approvals go through ask_human
        case sdk.UnknownMessage(type=kind):
            print(f"{DIM}(event {kind} from a newer engine){RESET}")
        case _:
            pass


async def main() -> int:
    options = session_options(DEMO_REPLIES, __doc__ or "")
    async with sdk.Session(**options, tools=[current_time], on_approval=ask_human) as session:
        server = session.server
        print(
            f"{DIM}{server.name if server else 'engine'} {server.version if server else ''}, "
            f"session {session.id}{RESET}"
        )
        turn = session.prompt("What time is it?")
        async for step in turn.iter_steps():
            print(f"\n{DIM}── step {step.n}{RESET}")
            async for event in step:
                show(event)
        result = turn.result
    usage = result.usage
    print(
        f"\n\n{DIM}{result.status}: {len(result.steps)} steps, {usage.input} tokens in, "
        f"{usage.output} out{RESET}"
    )
    return 0 if result.status == "finished" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
