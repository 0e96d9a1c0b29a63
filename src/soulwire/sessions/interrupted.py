"""Closing the turn a killed engine left open in a session's wire record.

A turn is open when its TurnBegin has no TurnEnd: the process died inside it. The next process
that opens the session appends what the turn would have ended with, in messages the protocol
already has, so that every face replaying the record (Wire `replay`, the web UI, the terminal
UI's resume, ACP's `session/load`) shows a closed turn and says why:

* an `ApprovalResponse` (`reject`, its feedback saying why) for each approval the client was
  asked and had not answered, so that no face keeps waiting for it;
* an error `ToolResult` ("interrupted: the engine stopped before this call finished") for each
  tool call that never got one — inside sub-agents too, wrapped as their events were;
* `CompactionEnd` for a compaction cut short, `StepInterrupted` for the step that was running;
* a `Notification` of the interruption (clients of protocol 1.10 and later see it);
* a `TurnEnd` for each turn left open (a flow's nested turns included)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from soulwire.ids import uuid4_hex
from soulwire.wire.messages import (
    ApprovalResponse,
    CompactionEnd,
    Notification,
    StepInterrupted,
    SubagentEvent,
    ToolResult,
    TurnEnd,
    envelope,
)
from soulwire.wire.types import WireModel, tool_error

ENGINE_STOPPED = "the engine stopped"
"""Why a turn a killed process left open ended."""
CANCELLED = "the turn was cancelled"
"""Why the calls a cancelled turn cut short ended."""
STEP_FAILED = "the step failed"
"""Why the calls of a step that raised ended."""


_PREFIX = "interrupted: "


def interrupted_result(why: str) -> Any:
    """The result of a tool call cut short (`why`: "the engine stopped", …)."""
    return tool_error(f"{_PREFIX}{why} before this call finished", brief="Interrupted")


def interruption(value: Any) -> str | None:
    """What `interrupted_result` said of a call it cut short ("the engine stopped before this
    call finished"), or None for any other result."""
    message = (value.message or "") if value.is_error else ""
    return message.removeprefix(_PREFIX) if message.startswith(_PREFIX) else None


_SubagentKey = tuple[str | None, str | None, str | None]
"""(parent tool call id, agent id, sub-agent type) of a SubagentEvent."""


@dataclass
class _Level:
    """What is still open at one level of the record: the session's, or one sub-agent's."""

    turns: int = 0
    calls: dict[str, None] = field(default_factory=dict[str, None])  # (ordered: call order)
    stepping: bool = False
    compacting: bool = False
    subagents: dict[_SubagentKey, _Level] = field(default_factory=dict[_SubagentKey, "_Level"])

    def fold(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("payload"), dict):
            return
        kind: Any = message.get("type")
        payload: dict[str, Any] = message["payload"]
        if kind == "TurnBegin":
            self.turns += 1
        elif kind == "TurnEnd":
            self.turns = max(0, self.turns - 1)
            if not self.turns:
                self.stepping = self.compacting = False
        elif kind == "StepBegin":
            self.stepping = True
        elif kind == "StepInterrupted":
            self.stepping = False
        elif kind in ("CompactionBegin", "CompactionEnd"):
            self.compacting = kind == "CompactionBegin"
        elif kind == "ToolCall" and isinstance(payload.get("id"), str):
            self.calls[payload["id"]] = None
        elif kind == "ToolResult" and isinstance(payload.get("tool_call_id"), str):
            self.calls.pop(payload["tool_call_id"], None)
        elif kind == "SubagentEvent":
            parent = payload.get("parent_tool_call_id") or payload.get("task_tool_call_id")
            fields = (parent, payload.get("agent_id"), payload.get("subagent_type"))
            key: _SubagentKey = tuple(v if isinstance(v, str) else None for v in fields)  # pyright: ignore[reportAssignmentType]
            self.subagents.setdefault(key, _Level()).fold(payload.get("event"))

    def lost(self) -> str | None:
        """What the interruption cut short at this level, as the notice names it."""
        if self.compacting:
            return "the compaction in progress"
        if self.calls:
            n = len(self.calls)
            return f"{n} tool call{'s' if n != 1 else ''} in progress (no result)"
        if self.stepping:
            return "the model's reply in progress"
        return None

    @property
    def is_open(self) -> bool:
        return bool(self.turns or self.calls)

    def closing(self, why: str) -> list[WireModel]:
        """The messages that close this level, innermost first."""
        out: list[WireModel] = []
        for (parent, agent, kind), level in self.subagents.items():
            out += [
                SubagentEvent(
                    parent_tool_call_id=parent, agent_id=agent, subagent_type=kind, event=envelope(m)
                )
                for m in level.closing(why)
            ]
        if self.compacting:
            out.append(CompactionEnd())
        out += [ToolResult(tool_call_id=c, return_value=interrupted_result(why)) for c in self.calls]
        if self.stepping:
            out.append(StepInterrupted())
        return out + [TurnEnd() for _ in range(self.turns)]


def resumed_notice(asked: list[str], interrupted: list[str]) -> Notification:
    """The Notification that opens the continuation of a turn a dead process left waiting
    for approvals (engine/recovery.py): which calls are asked again, which were cut short."""
    body = f"{ENGINE_STOPPED[0].upper()}{ENGINE_STOPPED[1:]} during this turn; it continues here"
    body += f": {len(asked)} approval{'s' if len(asked) != 1 else ''} asked again"
    if interrupted:
        body += f", {len(interrupted)} running call{'s' if len(interrupted) != 1 else ''} interrupted"
    return Notification(
        id="n" + uuid4_hex()[:8],
        category="turn",
        type="turn.resumed",
        source_kind="engine",
        source_id="",
        title="Turn resumed",
        body=body + ".",
        severity="info",
        created_at=time.time(),
        payload={"reason": ENGINE_STOPPED, "asked": asked, "interrupted": interrupted},
    )


@dataclass
class OpenTurn:
    """How to close the last turn of a record, and the sub-agents it left running."""

    messages: list[WireModel]
    subagents: list[str]


def close_open_turn(
    records: Iterable[dict[str, Any]], why: str = ENGINE_STOPPED, *, approvals: Iterable[str] = ()
) -> OpenTurn | None:
    """The messages that close the record's last turn (`{type, payload}` messages, in order),
    or None when that turn was closed; `approvals`: the ids of the approval requests that
    were waiting for the client's answer."""
    level = _Level()
    for message in records:
        if not level.turns and message.get("type") == "TurnBegin":
            level = _Level()  # only the last turn can be open
        level.fold(message)
    if not level.turns:
        return None
    agents = [agent for (_, agent, _), sub in level.subagents.items() if agent and sub.is_open]
    lost = level.lost()
    feedback = f"{_PREFIX}{why} before this approval was answered"
    messages: list[WireModel] = [
        ApprovalResponse(request_id=i, response="reject", feedback=feedback) for i in approvals
    ]
    messages += level.closing(why)
    notice = Notification(
        id="n" + uuid4_hex()[:8],
        category="turn",
        type="turn.interrupted",
        source_kind="engine",
        source_id="",
        title="Turn interrupted",
        body=f"{why[0].upper()}{why[1:]} before this turn finished (closed when the session reopened)"
        + (f"; lost: {lost}." if lost else "."),
        severity="warning",
        created_at=time.time(),
        payload={"reason": why, "lost": lost} if lost else {"reason": why},
    )
    messages.insert(len(messages) - level.turns, notice)  # just before the TurnEnds
    return OpenTurn(messages, agents)


__all__ = ["ENGINE_STOPPED", "OpenTurn", "close_open_turn", "interrupted_result", "resumed_notice"]
