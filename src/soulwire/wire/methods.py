"""Parameters and results of the client → server methods (spec §2.4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from soulwire.wire.messages import ApprovalAnswer, ApprovalKind, ToolResultAnswer
from soulwire.wire.params import PromptParams
from soulwire.wire.types import UserInput, WireModel, content_part_adapter, user_input_adapter


class ClientInfo(WireModel):
    name: str
    version: str | None = None


class ExternalToolSpec(WireModel):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ClientCapabilities(WireModel):
    supports_question: bool = False
    supports_plan_mode: bool = False


class HookSubscription(WireModel):
    id: str
    event: str
    matcher: str = ""
    timeout: float = 30


class InitializeParams(WireModel):
    protocol_version: str
    client: ClientInfo | None = None
    external_tools: list[ExternalToolSpec] | None = None
    capabilities: ClientCapabilities | None = None
    hooks: list[HookSubscription] | None = None


class ServerInfo(WireModel):
    name: str
    version: str


class SlashCommandInfo(WireModel):
    name: str
    description: str
    aliases: list[str] = Field(default_factory=list)


class RejectedTool(WireModel):
    name: str
    reason: str


class ExternalToolsResult(WireModel):
    accepted: list[str] = Field(default_factory=list)
    rejected: list[RejectedTool] = Field(default_factory=list)


class PromptResult(WireModel):
    status: Literal["finished", "cancelled", "max_steps_reached"]
    steps: int | None = None


class ReplayResult(WireModel):
    status: Literal["finished", "cancelled"]
    events: int
    requests: int


class SteerParams(WireModel):
    user_input: UserInput


class SetPlanModeParams(WireModel):
    enabled: bool


class SetPlanModeResult(WireModel):
    status: Literal["ok"] = "ok"
    plan_mode: bool


__all__ = [
    "ApprovalAnswer", "ApprovalKind", "ClientCapabilities", "ClientInfo", "ExternalToolSpec",
    "ExternalToolsResult", "HookSubscription", "InitializeParams", "PromptParams", "PromptResult",
    "RejectedTool", "ReplayResult", "ServerInfo", "SetPlanModeParams", "SetPlanModeResult",
    "SlashCommandInfo", "SteerParams", "ToolResultAnswer", "content_part_adapter", "user_input_adapter",
]  # fmt: skip
