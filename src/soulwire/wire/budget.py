"""Budgets: the limits a session's work may spend, as the engine enforces them and every face
sets and shows them (the config's `[budgets]`, the `--budget-*` flags, `initialize`'s `budget`,
the `set_budget` method, the SDK's `Options(budget=…)`, a fleet's tasks).

Four limits — `usd` (priced with `soulwire.wire.pricing`), `tokens` (input + output), `time_s`
(wall time while the work runs) and `tool_calls` — at three scopes:

- `turn`: what one prompt's turn spends, its sub-agents included;
- `session`: the session's own model and tool calls, across its turns and resumes;
- `tree`: the session plus every sub-agent and background agent it started, however deep.

A client that declares `capabilities.supports_budget` in `initialize` receives the events
below and the prompt status `budget_exceeded`; any other client sees the same stop as
`cancelled`, and none of these events."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from soulwire.wire.types import WireModel

BudgetScope = Literal["turn", "session", "tree"]
BudgetKind = Literal["usd", "tokens", "time_s", "tool_calls"]
SCOPES: tuple[BudgetScope, ...] = ("turn", "session", "tree")
KINDS: tuple[BudgetKind, ...] = ("usd", "tokens", "time_s", "tool_calls")
DEFAULT_WARN_AT = 0.8


class BudgetLimits(WireModel):
    """The limits of one scope; an absent (null) limit is no limit."""

    model_config = ConfigDict(extra="forbid")  # a mistyped limit must not pass as no limit

    usd: float | None = Field(
        default=None, ge=0, description="money, USD, from the price table", examples=[5.0]
    )
    tokens: int | None = Field(
        default=None, ge=0, description="input + output tokens of model calls", examples=[2_000_000]
    )
    time_s: float | None = Field(default=None, gt=0, description="wall time, seconds", examples=[1800])
    tool_calls: int | None = Field(default=None, ge=0, description="tool calls run", examples=[200])


class Budget(WireModel):
    """A session's limits by scope, when to warn, and what a crossed limit does to tool calls
    still running. Sent as an update (`initialize`'s `budget`, `set_budget`), only the fields
    present change: a scope's limits are replaced one by one, and null removes one."""

    model_config = ConfigDict(extra="forbid")

    turn: BudgetLimits | None = None
    session: BudgetLimits | None = None
    tree: BudgetLimits | None = None
    warn_at: float = Field(
        default=DEFAULT_WARN_AT, gt=0, le=1, description="the fraction of a limit that sends BudgetWarning"
    )
    running_tools: Literal["finish", "cancel"] = Field(
        default="finish",
        description="when a limit is crossed while tool calls run (a sub-agent's spend, the time): "
        "let them finish, or cancel them (their results say so)",
    )

    def limits(self, scope: BudgetScope) -> BudgetLimits | None:
        return self.turn if scope == "turn" else self.session if scope == "session" else self.tree

    def is_empty(self) -> bool:
        """No limit at any scope."""
        return not any(
            getattr(limits, kind) is not None
            for scope in SCOPES
            if (limits := self.limits(scope))
            for kind in KINDS
        )

    def updated(self, update: Budget) -> Budget:
        """This budget with `update`'s fields applied (see the class)."""
        merged = self.model_copy(deep=True)
        for name in update.model_fields_set & {"warn_at", "running_tools"}:
            setattr(merged, name, getattr(update, name))
        for scope in SCOPES:
            if scope not in update.model_fields_set:
                continue
            new = update.limits(scope)
            old = merged.limits(scope)
            if new is None or old is None:
                setattr(merged, scope, None if new is None else new.model_copy())
                continue
            for kind in new.model_fields_set & set(KINDS):
                setattr(old, kind, getattr(new, kind))
        return merged


class BudgetSpent(WireModel):
    """What one scope has spent."""

    usd: float | None = Field(default=0.0, description="null when a model without a price was used")
    tokens: int = 0
    time_s: float = 0.0
    tool_calls: int = 0


class BudgetReport(WireModel):
    """The budget and what each scope has spent (and has left, for the limits that are set):
    the result of `set_budget`, and the `BudgetUpdate` event after each step."""

    budget: Budget
    spent: dict[BudgetScope, BudgetSpent]
    remaining: dict[BudgetScope, BudgetLimits]


class BudgetUpdate(BudgetReport):
    """Event: spent and remaining after a model call or a batch of tool calls (only while a
    limit is set)."""


class BudgetWarning(WireModel):
    """Event: `spent` reached `warn_at` of a limit (once per limit; per turn for `turn`)."""

    scope: BudgetScope
    limit: BudgetKind
    spent: float
    max: float
    fraction: float


class BudgetExceeded(WireModel):
    """Event: a limit is reached; the turn ends with `budget_exceeded` at its next safe point.
    Raise the limit (`set_budget`) and prompt again to continue."""

    scope: BudgetScope
    limit: BudgetKind
    spent: float
    max: float


class SetBudgetResult(BudgetReport):
    status: Literal["ok"] = "ok"


BUDGET_EVENTS: tuple[type[WireModel], ...] = (BudgetUpdate, BudgetWarning, BudgetExceeded)
"""Sent only to clients that declared `supports_budget`."""

__all__ = [
    "BUDGET_EVENTS", "DEFAULT_WARN_AT", "KINDS", "SCOPES", "Budget", "BudgetExceeded", "BudgetKind",
    "BudgetLimits", "BudgetReport", "BudgetScope", "BudgetSpent", "BudgetUpdate", "BudgetWarning",
    "SetBudgetResult",
]  # fmt: skip
