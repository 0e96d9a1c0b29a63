"""Cancel receipts: what a `cancel` stopped, and what it deliberately left running.

A client that asks (`cancel {"receipt": true}`; `soulwire serve` and the extended stdio mode
ask for clients that negotiated the extensions) gets its answer once the turn has wound
down, not the moment the cancel lands, so the receipt reports facts, not intentions:

    {"receipt": {
        "stopped": {"tool_calls": [{"id", "name"}], "process_groups": [pgid],
                    "subagents": [agent_id]},
        "left_running": {"background_tasks": [{"id", "description", "command", "pgid"}]},
        "survived": [pgid]}}

`process_groups` are the groups the running tool calls started (sub-agents' included) that
were alive when the cancel landed and are gone now; background tasks outlive a cancel by
design and are listed, not killed; `survived` names any other group still alive after the
grace period (it should be empty: the lifetime watchdog still ends them with the engine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from soulwire.tools.builtin.process import group_alive

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime

GRACE_S = 3.0
"""How long a stopped group may take to be gone (SIGTERM, then the tool's SIGKILL)."""


@dataclass
class Snapshot:
    """What was running when the cancel landed."""

    calls: list[tuple[str, str, set[int]]]
    subagents: list[str]
    groups: set[int]


def snapshot(runtime: Runtime) -> Snapshot:
    calls = [(call_id, c.name, c.groups) for call_id, c in runtime.soul.running_calls.items()]
    agent_tool = runtime.toolset.get("Agent")
    running: frozenset[str] = getattr(agent_tool, "running", frozenset())
    groups = {g for _, _, gs in calls for g in gs if group_alive(g)}
    return Snapshot(calls, sorted(running), groups)


async def receipt(before: Snapshot, runtime: Runtime) -> dict[str, Any]:
    """The receipt, once the turn has ended (call after it has)."""
    background = runtime.tasks.running() if runtime.tasks else []
    kept = {t.pgid for t in background if t.pgid is not None}
    candidates = before.groups - kept
    with anyio.move_on_after(GRACE_S):
        while any(group_alive(g) for g in candidates):
            await anyio.sleep(0.02)
    survived = sorted(g for g in candidates if group_alive(g))
    return {
        "receipt": {
            "stopped": {
                "tool_calls": [{"id": call_id, "name": name} for call_id, name, _ in before.calls],
                "process_groups": sorted(candidates.difference(survived)),
                "subagents": before.subagents,
            },
            "left_running": {
                "background_tasks": [
                    {"id": t.id, "description": t.description, "command": t.command, "pgid": t.pgid}
                    for t in background
                ]
            },
            "survived": survived,
        }
    }


__all__ = ["Snapshot", "receipt", "snapshot"]
