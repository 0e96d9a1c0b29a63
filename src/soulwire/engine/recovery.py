"""Opening a session a killed engine left inside a turn: the turn is closed in both records,
or — where the host takes sessions over from a store (`serve`) and the turn was only waiting
for approvals — continued.

Closing: the model's view (context.jsonl) gets an error result for every tool call that never
got one and a note that the request was interrupted; the wire record gets the messages that
end the turn (sessions/interrupted.py), the approvals the client was asked and never answered
among them (they are in the state while they wait). The context is written first: a process
killed between the two leaves the turn open, and the next one closes it again — both halves
are idempotent.

Continuing (`plan_continuation`): the model's reply of the turn's last step is complete and on
record in both (its tool calls in the context, the wire's ToolCalls), no sub-agent, compaction
or nested turn is open, and at least one of the step's calls was waiting for its approval.
Then nothing is written when the session opens: the soul continues the turn
(`Soul.continue_turn`) — each waiting call runs again and asks again under the same request
id (nothing ran before its approval), a call that was running gets an interrupted result
(its process died with the engine), a call that had finished keeps its recorded result, and
the agent loop goes on from the next step to the turn's TurnEnd."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from soulwire.engine.context import Context
from soulwire.engine.state import PENDING_APPROVALS_KEY
from soulwire.sessions.interrupted import ENGINE_STOPPED, close_open_turn
from soulwire.sessions.store import SessionStore
from soulwire.wire.messages import envelope
from soulwire.wire.types import ToolCall, ToolReturnValue


@dataclass
class Continuation:
    """How to continue the turn a dead process left waiting for approvals."""

    step: int
    """The number of the step whose tool calls were waiting."""
    calls: list[ToolCall]
    """That step's tool calls, in order (from the model's reply in the context)."""
    results: dict[str, ToolReturnValue] = field(default_factory=dict[str, ToolReturnValue])
    """The calls that had finished: their recorded results."""
    asked: dict[str, str] = field(default_factory=dict[str, str])
    """Tool call id → id of the approval request it was waiting for (asked again)."""

    @property
    def interrupted(self) -> list[str]:
        """The calls that were running: neither finished nor waiting for an approval."""
        return [c.id for c in self.calls if c.id not in self.results and c.id not in self.asked]


def _pending(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The approvals the state says were waiting (an older session's bare ids as `{id}`)."""
    asked = state.get(PENDING_APPROVALS_KEY)
    if not isinstance(asked, list):
        return []
    entries: list[dict[str, Any]] = []
    for entry in asked:
        if isinstance(entry, str):
            entries.append({"id": entry})
        elif isinstance(entry, dict) and isinstance(entry.get("id"), str):
            entries.append(entry)
    return entries


def close_interrupted_turn(store: SessionStore, context: Context, why: str = ENGINE_STOPPED) -> list[str]:
    """Close the store's last turn if a killed process left it open; returns the ids of the
    sub-agents that turn left running (their own records are theirs to close)."""
    if not store.has_open_turn():
        return []
    state = store.load_state()
    approvals = [entry["id"] for entry in _pending(state)]
    open_turn = close_open_turn(store.wire_records(), why, approvals=approvals)
    context.close_interrupted(why)
    if open_turn is None:
        return []
    for message in open_turn.messages:
        store.record_wire(envelope(message))
    if PENDING_APPROVALS_KEY in state:  # answered now
        del state[PENDING_APPROVALS_KEY]
        store.save_state(state)
    return open_turn.subagents


def plan_continuation(store: SessionStore, context: Context) -> Continuation | None:
    """How to continue the store's last turn, when a killed process left it waiting only for
    approvals (see the module docstring); None when it must be closed instead (or is closed)."""
    if not store.has_open_turn():
        return None
    pending = _pending(store.load_state())
    if not pending or any("tool_call_id" not in p or p.get("agent_id") for p in pending):
        return None  # an older session's bare ids, or a sub-agent's approval: closed
    last = context.history[-1] if context.history else None
    if last is None or last.role != "assistant" or not last.tool_calls:
        return None  # the model's reply was not complete (its call was in flight)
    calls = list(last.tool_calls)
    step = _last_step(list(store.wire_records()), [c.id for c in calls])
    if step is None:
        return None
    n, results = step
    ids = {c.id for c in calls}
    asked = {str(p["tool_call_id"]): str(p["id"]) for p in pending if p["tool_call_id"] in ids}
    asked = {c: i for c, i in asked.items() if c not in results}
    if not asked:
        return None
    return Continuation(step=n, calls=calls, results=results, asked=asked)


_OPENERS = frozenset({"SubagentEvent", "StepInterrupted"})
"""What the last step of a continuable turn must not hold after its StepBegin (a sub-agent's
records are its own to continue: a step that ran one is closed)."""


def _last_step(
    records: list[dict[str, Any]], call_ids: list[str]
) -> tuple[int, dict[str, ToolReturnValue]] | None:
    """(n, recorded results) of the record's last step, when it is the one open step of the one
    open turn and its ToolCalls are `call_ids`; None otherwise."""
    depth, begin = 0, None
    for i, message in enumerate(records):
        kind = message.get("type")
        if kind == "TurnBegin":
            begin = i if depth == 0 else begin
            depth += 1
        elif kind == "TurnEnd":
            depth = max(0, depth - 1)
    if depth != 1 or begin is None:
        return None
    turn = records[begin + 1 :]
    steps = [i for i, m in enumerate(turn) if m.get("type") == "StepBegin"]
    if not steps or any(m.get("type") in ("TurnEnd", "TurnBegin") for m in turn):
        return None  # no step, or a nested (flow) turn
    payload = turn[steps[-1]].get("payload")
    n = payload.get("n") if isinstance(payload, dict) else None
    if not isinstance(n, int):
        return None
    recorded: list[str] = []
    results: dict[str, ToolReturnValue] = {}
    compacting = False
    for message in turn[steps[-1] + 1 :]:
        kind, body = message.get("type"), message.get("payload")
        if kind in _OPENERS or not isinstance(body, dict):
            return None
        if kind in ("CompactionBegin", "CompactionEnd"):
            compacting = kind == "CompactionBegin"
        elif kind == "ToolCall" and isinstance(body.get("id"), str):
            recorded.append(body["id"])
        elif kind == "ToolResult" and isinstance(body.get("tool_call_id"), str):
            try:
                results[body["tool_call_id"]] = ToolReturnValue.model_validate(body.get("return_value"))
            except ValidationError:
                return None
    if compacting or recorded != call_ids or not set(results) <= set(call_ids):
        return None
    return n, results


__all__ = ["Continuation", "close_interrupted_turn", "plan_continuation"]
