"""Wire messages: events (notifications) and requests (server → client), their envelope
`{type, payload}` and the protocol version each type first appeared in (spec §3.3, §3.4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, Field, ValidationError

from soulwire.wire.budget import BUDGET_EVENTS
from soulwire.wire.checkpoints import CheckpointTaken, OverlayApplied, OverlayPending
from soulwire.wire.model_switch import ModelChanged
from soulwire.wire.types import (
    CONTENT_PART_TYPES,
    DisplayBlock,
    MCPStatusSnapshot,
    QuestionItem,
    SandboxStatus,
    TokenUsage,
    ToolCall,
    ToolCallPart,
    ToolReturnValue,
    UserInput,
    WireModel,
    content_part_adapter,
)

# ---------------------------------------------------------------- events


class TurnBegin(WireModel):
    user_input: UserInput


class TurnEnd(WireModel):
    pass


class StepBegin(WireModel):
    n: int


class StepInterrupted(WireModel):
    pass


class StepRetry(WireModel):
    n: int
    next_attempt: int
    max_attempts: int
    wait_s: float
    error_type: str
    status_code: int | None = None


class CompactionBegin(WireModel):
    pass


class CompactionEnd(WireModel):
    pass


def _is_none(value: object) -> bool:
    return value is None


class StatusUpdate(WireModel):
    """Null fields mean "unchanged or unknown": clients merge the non-null ones."""

    context_usage: float | None = None
    context_tokens: int | None = None
    max_context_tokens: int | None = None
    token_usage: TokenUsage | None = None
    message_id: str | None = None
    plan_mode: bool | None = None
    mcp_status: MCPStatusSnapshot | None = None
    sandbox: SandboxStatus | None = Field(default=None, exclude_if=_is_none)
    """Soulwire's addition, present only while a sandbox is on: absent, the stream is exactly
    what clients knew before."""


class ToolResult(WireModel):
    tool_call_id: str
    return_value: ToolReturnValue


ApprovalKind = Literal["approve", "approve_for_session", "reject"]


class ApprovalResponse(WireModel):
    request_id: str
    response: ApprovalKind
    feedback: str = ""


class SubagentEvent(WireModel):
    parent_tool_call_id: str | None = Field(
        default=None, validation_alias=AliasChoices("parent_tool_call_id", "task_tool_call_id")
    )
    agent_id: str | None = None
    subagent_type: str | None = None
    event: dict[str, Any]


SUBAGENT_FIELDS_SINCE: tuple[int, int] = (1, 6)
"""Before 1.6 a SubagentEvent carried only `task_tool_call_id` and `event`."""


def legacy_subagent_envelope(parent_tool_call_id: str | None, event: Any) -> dict[str, Any]:
    """A SubagentEvent as a client of protocol 1.5 or older knows it."""
    return {
        "type": "SubagentEvent",
        "payload": {"task_tool_call_id": parent_tool_call_id or "", "event": event},
    }


class SteerInput(WireModel):
    user_input: UserInput


class PlanDisplay(WireModel):
    content: str
    file_path: str


class HookTriggered(WireModel):
    event: str
    target: str = ""
    hook_count: int = 1


class HookResolved(WireModel):
    event: str
    target: str = ""
    action: Literal["allow", "block"] = "allow"
    reason: str = ""
    duration_ms: int = 0


class BtwBegin(WireModel):
    id: str
    question: str


class BtwEnd(WireModel):
    id: str
    response: str | None = None
    error: str | None = None


class MCPLoadingBegin(WireModel):
    pass


class MCPLoadingEnd(WireModel):
    pass


class Notification(WireModel):
    id: str
    category: str
    type: str
    source_kind: str
    source_id: str
    title: str
    body: str
    severity: str
    created_at: float
    payload: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- requests and their answers


class ApprovalRequest(WireModel):
    id: str
    tool_call_id: str
    sender: str
    action: str
    description: str
    source_kind: Literal["foreground_turn", "background_agent"] | None = None
    source_id: str | None = None
    agent_id: str | None = None
    subagent_type: str | None = None
    source_description: str | None = None
    display: list[DisplayBlock] = Field(default_factory=list)


class ToolCallRequest(WireModel):
    id: str
    name: str
    arguments: str | None = None


class QuestionRequest(WireModel):
    id: str
    tool_call_id: str
    questions: list[QuestionItem]


class HookRequest(WireModel):
    id: str
    subscription_id: str = ""
    event: str
    target: str = ""
    input_data: dict[str, Any] = Field(default_factory=dict)


class QuestionResponse(WireModel):
    request_id: str
    answers: dict[str, str] = Field(default_factory=dict)


class HookResponse(WireModel):
    request_id: str
    action: Literal["allow", "block"] = "allow"
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    """Soulwire extension: PreToolUse only, for engines whose `initialize` result lists the
    event in `hooks.updated_input`."""


class ApprovalAnswer(WireModel):
    """The client's answer to an ApprovalRequest."""

    request_id: str = ""
    response: ApprovalKind
    feedback: str = ""


class ToolResultAnswer(WireModel):
    """The client's answer to a ToolCallRequest (a ToolResult)."""

    tool_call_id: str = ""
    return_value: ToolReturnValue


class UnknownMessage(WireModel):
    """A message whose type this version does not know, kept raw instead of failing."""

    type: str
    payload: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- registry and envelope

EVENT_TYPES: dict[str, type[WireModel]] = {
    cls.__name__: cls
    for cls in (
        TurnBegin, TurnEnd, StepBegin, StepInterrupted, StepRetry, CompactionBegin, CompactionEnd,
        StatusUpdate, ToolCall, ToolCallPart, ToolResult, ApprovalResponse, SubagentEvent,
        SteerInput, PlanDisplay, HookTriggered, HookResolved, BtwBegin, BtwEnd, MCPLoadingBegin,
        MCPLoadingEnd, Notification, CheckpointTaken, OverlayPending, OverlayApplied, *BUDGET_EVENTS,
        ModelChanged,
    )
}  # fmt: skip
REQUEST_TYPES: dict[str, type[WireModel]] = {
    cls.__name__: cls for cls in (ApprovalRequest, ToolCallRequest, QuestionRequest, HookRequest)
}
LEGACY_NAMES = {"ApprovalRequestResolved": "ApprovalResponse"}

Event = WireModel
"""Any event model (an entry of EVENT_TYPES or a content part)."""

# Protocol version that introduced each type. A client that declared an older version
# never receives newer types (the Go SDK stops reading at an unknown type).
INTRODUCED_IN: dict[str, tuple[int, int]] = {
    "TurnEnd": (1, 2),
    "SteerInput": (1, 5),
    "PlanDisplay": (1, 7),
    # Documented as 1.7 (shipped with the 1.8 bump): the Node SDK declares 1.7 and handles them.
    "HookTriggered": (1, 7),
    "HookResolved": (1, 7),
    "BtwBegin": (1, 9),
    "BtwEnd": (1, 9),
    "StepRetry": (1, 10),
    "MCPLoadingBegin": (1, 10),
    "MCPLoadingEnd": (1, 10),
    "Notification": (1, 10),
    "QuestionRequest": (1, 4),
    "HookRequest": (1, 7),
}


def type_name(message: WireModel) -> str:
    """The envelope `type` of a message: `ContentPart` for every content part."""
    if isinstance(message, CONTENT_PART_TYPES):
        return "ContentPart"
    if isinstance(message, UnknownMessage):
        return message.type
    return type(message).__name__


def envelope(message: WireModel) -> dict[str, Any]:
    """`{"type", "payload"}` with every field serialised, nulls and defaults included."""
    if isinstance(message, UnknownMessage):
        return {"type": message.type, "payload": message.payload}
    return {"type": type_name(message), "payload": message.model_dump(mode="json")}


def parse_envelope(type_: str, payload: Any) -> WireModel:
    """Decode one envelope; unknown or invalid messages come back as UnknownMessage."""
    name = LEGACY_NAMES.get(type_, type_)
    raw: dict[str, Any] = payload if isinstance(payload, dict) else {}
    try:
        if name == "ContentPart":
            return content_part_adapter().validate_python(raw)
        cls = EVENT_TYPES.get(name) or REQUEST_TYPES.get(name)
        if cls is not None:
            return cls.model_validate(raw)
    except ValidationError:
        pass
    return UnknownMessage(type=type_, payload=raw)


__all__ = [
    "EVENT_TYPES",
    "REQUEST_TYPES",
    "ApprovalRequest",
    "ApprovalResponse",
    "BtwBegin",
    "BtwEnd",
    "CompactionBegin",
    "CompactionEnd",
    "Event",
    "HookRequest",
    "HookResolved",
    "HookResponse",
    "HookTriggered",
    "MCPLoadingBegin",
    "MCPLoadingEnd",
    "Notification",
    "PlanDisplay",
    "QuestionRequest",
    "QuestionResponse",
    "StatusUpdate",
    "SteerInput",
    "StepBegin",
    "StepInterrupted",
    "StepRetry",
    "SubagentEvent",
    "ToolCall",
    "ToolCallPart",
    "ToolCallRequest",
    "ToolResult",
    "TurnBegin",
    "TurnEnd",
    "UnknownMessage",
    "envelope",
    "legacy_subagent_envelope",
    "parse_envelope",
    "type_name",
]
