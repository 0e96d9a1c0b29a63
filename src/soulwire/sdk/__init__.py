"""Python SDK: drive any Wire engine (`soulwire --wire` or `kimi --wire`) over stdio.

    import soulwire.sdk as sdk

    async with sdk.Session(work_dir=".", tools=[my_tool], on_approval=policy) as session:
        async for event in session.prompt("fix the failing test"):
            ...
    text = await sdk.ask("summarise README.md", work_dir=".")

Events are the `soulwire.wire` models (TextPart, ThinkPart, ToolCall, ToolResult,
StatusUpdate, …); approvals arrive as `Approval` objects to answer; types this SDK does not
know arrive as `UnknownMessage`. See docs/sdk.md. Depends on `soulwire.wire` only."""

from soulwire.sdk import errors
from soulwire.sdk.approvals import Approval, ApprovalDecision, Question
from soulwire.sdk.ask import ask, ask_result
from soulwire.sdk.errors import *  # noqa: F403 -- the error types, listed once in errors.__all__
from soulwire.sdk.options import SDK_PROTOCOL_VERSION, Options
from soulwire.sdk.session import Session, SessionInfo
from soulwire.sdk.sync import SyncSession
from soulwire.sdk.tools import Tool, ToolError, tool
from soulwire.sdk.turn import Replay, ReplayResult, Step, Turn, TurnResult
from soulwire.wire.messages import UnknownMessage

__all__ = [
    "SDK_PROTOCOL_VERSION",
    "Approval",
    "ApprovalDecision",
    "Options",
    "Question",
    "Replay",
    "ReplayResult",
    "Session",
    "SessionInfo",
    "Step",
    "SyncSession",
    "Tool",
    "ToolError",
    "Turn",
    "TurnResult",
    "UnknownMessage",
    "ask",
    "ask_result",
    "tool",
]
__all__ += errors.__all__
