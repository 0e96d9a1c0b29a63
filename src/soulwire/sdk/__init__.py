"""Python SDK: drive any Wire engine (`soulwire --wire` or `kimi --wire`) over stdio.

    import soulwire.sdk as sdk

    async with sdk.Session(work_dir=".", tools=[my_tool], on_approval=policy) as session:
        async for event in session.prompt("fix the failing test"):
            ...
    text = await sdk.ask("summarise README.md", work_dir=".")
    async for message in sdk.query("fix it", sdk.Options(work_dir=".", max_turns=20)):
        ...  # AssistantText, Thinking, ToolUse, ToolResultMessage, Status, then ResultMessage

Also: hooks as Python callables (`Hook`), in-process MCP servers (`mcp_servers=`), stored
sessions (`LocalSessions`, `ServerSessions`: list, typed history, fork at a turn, delete),
`Session.query/interrupt/set_model/get_server_info`.

Events are the `soulwire.wire` models (TextPart, ThinkPart, ToolCall, ToolResult,
StatusUpdate, …); approvals arrive as `Approval` objects to answer; types this SDK does not
know arrive as `UnknownMessage`. See docs/sdk.md. Depends on `soulwire.wire` only."""

from soulwire.sdk import errors
from soulwire.sdk.approvals import Approval, ApprovalDecision, Question
from soulwire.sdk.ask import ask, ask_result
from soulwire.sdk.checkpoints import RewindConflictError
from soulwire.sdk.errors import *  # noqa: F403 -- the error types, listed once in errors.__all__
from soulwire.sdk.hooks import HOOK_EVENTS, Hook, HookEvent
from soulwire.sdk.messages import (
    AssistantText,
    Message,
    ResultMessage,
    Status,
    Thinking,
    ToolResultMessage,
    ToolUse,
)
from soulwire.sdk.options import SDK_PROTOCOL_VERSION, Options
from soulwire.sdk.permissions import Allow, Deny, ToolPermissionContext
from soulwire.sdk.pricing import DEFAULT_PRICES, ModelPrice
from soulwire.sdk.query import prompt, query
from soulwire.sdk.session import EngineInfo, Session, SessionInfo
from soulwire.sdk.sessions import HistoryTurn, LocalSessions, ServerSessions, StoredSession
from soulwire.sdk.structured import StructuredOutputError
from soulwire.sdk.sync import SyncSession
from soulwire.sdk.tools import Tool, ToolError, tool
from soulwire.sdk.turn import Replay, ReplayResult, Step, Turn, TurnResult
from soulwire.wire.messages import UnknownMessage

__all__ = [
    "DEFAULT_PRICES",
    "HOOK_EVENTS",
    "SDK_PROTOCOL_VERSION",
    "Allow",
    "Approval",
    "ApprovalDecision",
    "AssistantText",
    "Deny",
    "EngineInfo",
    "HistoryTurn",
    "Hook",
    "HookEvent",
    "LocalSessions",
    "Message",
    "ModelPrice",
    "Options",
    "Question",
    "Replay",
    "ReplayResult",
    "ResultMessage",
    "RewindConflictError",
    "ServerSessions",
    "Session",
    "SessionInfo",
    "Status",
    "Step",
    "StoredSession",
    "StructuredOutputError",
    "SyncSession",
    "Thinking",
    "Tool",
    "ToolError",
    "ToolPermissionContext",
    "ToolResultMessage",
    "ToolUse",
    "Turn",
    "TurnResult",
    "UnknownMessage",
    "ask",
    "ask_result",
    "prompt",
    "query",
    "tool",
]
__all__ += errors.__all__
