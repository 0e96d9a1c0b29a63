"""Approval policies of tasks as data: a fixed answer (`yolo`, `approve`, `reject`) or an
ordered list of rules matched against each approval request, first match wins.

    {"rules": [{"sender": "Shell", "description": "Run command `git *", "decision": "approve"},
               {"sender": "WriteFile", "decision": "approve"}],
     "default": "reject"}

A rule's `sender` (the tool asking, e.g. `Shell`), `action` (e.g. `run command`) and
`description` (e.g. ``Run command `git status` ``) are shell-style patterns (`fnmatch`, case-sensitive);
a field left out matches anything."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Decision = Literal["approve", "reject"]


class ApprovalRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sender: str | None = None
    action: str | None = None
    description: str | None = None
    decision: Decision

    def matches(self, sender: str, action: str, description: str) -> bool:
        pairs = ((self.sender, sender), (self.action, action), (self.description, description))
        return all(pattern is None or fnmatchcase(value, pattern) for pattern, value in pairs)


class ApprovalRules(BaseModel):
    """Rules tried in order; `default` answers a request no rule matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[ApprovalRule] = Field(default_factory=lambda: list[ApprovalRule]())
    default: Decision = "reject"

    def decide(self, sender: str, action: str, description: str) -> Decision:
        for rule in self.rules:
            if rule.matches(sender, action, description):
                return rule.decision
        return self.default


def decide(policy: str | ApprovalRules, sender: str, action: str, description: str) -> Decision:
    """The answer of `policy` to one approval request (`yolo` answers approve: an engine run
    with `--yolo` does not ask, but a request that still comes is approved)."""
    if isinstance(policy, ApprovalRules):
        return policy.decide(sender, action, description)
    return "reject" if policy == "reject" else "approve"


__all__ = ["ApprovalRule", "ApprovalRules", "Decision", "decide"]
