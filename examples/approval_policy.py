"""An approval policy: read-only shell commands run without asking, dangerous ones are
rejected with feedback (the model is told why and tries another way), and anything else is
left to the declared default after a timeout — the session never waits forever.

    python examples/approval_policy.py          # offline (needs an engine with the Shell tool)
    python examples/approval_policy.py --real
"""

from __future__ import annotations

import asyncio
import sys

from offline import call, session_options

import soulwire.sdk as sdk
from soulwire.wire.types import ShellDisplayBlock

READ_ONLY = ("ls", "pwd", "cat ", "echo ", "git status", "git diff", "git log")
FORBIDDEN = ("rm -rf", "sudo ", "git push", "curl ", "chmod -R")

DEMO_REPLIES = [
    call("c1", "Shell", {"command": "echo hello from the agent"}),
    call("c2", "Shell", {"command": "rm -rf build"}),
    call("c3", "Shell", {"command": "touch notes.txt"}),
    "text: I listed what I could and left the build directory alone.",
]


def shell_command(approval: sdk.Approval) -> str | None:
    for block in approval.display:
        if isinstance(block, ShellDisplayBlock):
            return block.command
    return None


def policy(approval: sdk.Approval) -> sdk.ApprovalDecision | None:
    command = shell_command(approval)
    if command is None:
        return None  # not a shell command: leave it to the default
    if any(bad in command for bad in FORBIDDEN):
        return sdk.ApprovalDecision.reject(f"`{command}` is not allowed here; find a safer way")
    if command.startswith(READ_ONLY):
        return sdk.ApprovalDecision.approve()
    return None


async def main() -> int:
    options = session_options(DEMO_REPLIES, __doc__ or "")
    async with sdk.Session(
        **options, on_approval=policy, approval_timeout=2.0, approval_default="reject"
    ) as session:
        turn = session.prompt("Clean up the build output and take notes.")
        async for event in turn:
            if isinstance(event, sdk.Approval):
                print(f"approval requested: {event.description}")
        for step in turn.result.steps:
            for approval in step.approvals:
                decision = approval.decision or sdk.ApprovalDecision("reject")
                feedback = f": {decision.feedback}" if decision.feedback else ""
                print(f"  {approval.description}: {decision.response} (by {approval.answered_by}){feedback}")
            for result in step.tool_results:
                print(f"  tool result: {result.return_value.message}")
        print(turn.result.final_text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
