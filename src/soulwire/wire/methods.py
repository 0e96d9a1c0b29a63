"""Parameters and results of the client → server methods (spec §2.4)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from soulwire.wire.budget import Budget, SetBudgetResult
from soulwire.wire.messages import ApprovalAnswer, ApprovalKind, ToolResultAnswer
from soulwire.wire.model_switch import SessionModel, SetModelParams
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
    supports_checkpoints: bool = False
    """Soulwire extension: workspace checkpoints (`CheckpointTaken`, `checkpoints`, `changes`,
    `rewind`, `fork`); the answer's `capabilities` says whether the engine has them on."""
    supports_budget: bool = False
    """Budget events and the prompt status `budget_exceeded` (soulwire's; wire/budget.py)."""
    supports_model_switch: bool = False
    """Soulwire extension: `set_model` and the `ModelChanged` event (wire/model_switch.py)."""


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
    budget: Budget | None = None
    """The session's budget, over the configuration's (soulwire's; wire/budget.py)."""
    prices: dict[str, dict[str, float]] | None = None
    """Model prices for the session, over the configuration's `[prices]`: USD per million
    tokens, `{"MODEL": {"input": …, "output": …, "cache_read": …, "cache_write": …}}`."""


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
    status: Literal["finished", "cancelled", "max_steps_reached", "budget_exceeded"]
    """`budget_exceeded` only to a client that declared `supports_budget` (others: `cancelled`)."""
    steps: int | None = None


class ReplayResult(WireModel):
    status: Literal["finished", "cancelled"]
    events: int
    requests: int


class SteerParams(WireModel):
    user_input: UserInput


class SetPlanModeParams(WireModel):
    enabled: bool


class SetBudgetParams(Budget):
    """`set_budget`: change the session's budget (only the fields present); answers with the
    budget and what each scope has spent (`SetBudgetResult`)."""


class SetPlanModeResult(WireModel):
    status: Literal["ok"] = "ok"
    plan_mode: bool


class SetModelResult(SessionModel):
    """`set_model`: what the session runs on now (wire/model_switch.py)."""

    status: Literal["ok"] = "ok"


__all__ = [
    "ApprovalAnswer", "ApprovalKind", "ClientCapabilities", "ClientInfo", "ExternalToolSpec",
    "ExternalToolsResult", "HookSubscription", "InitializeParams", "PromptParams", "PromptResult",
    "RejectedTool", "ReplayResult", "ServerInfo", "SetBudgetParams", "SetBudgetResult", "SetModelParams",
    "SetModelResult", "SetPlanModeParams", "SetPlanModeResult",
    "SlashCommandInfo", "SteerParams", "ToolResultAnswer", "content_part_adapter", "user_input_adapter",
]  # fmt: skip
