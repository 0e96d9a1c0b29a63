"""Shell hooks run for real: exit 2 blocks with the reason, anything else allows (fail-open)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from soulwire.engine.bus import EventBus
from soulwire.engine.hooks import Hook, HookDecision, HookEngine
from soulwire.tools.commands import run_shell_command
from soulwire.wire.messages import HookResolved, HookTriggered
from soulwire.wire.types import WireModel


def engine_with(*hooks: Hook, tmp: Path) -> tuple[HookEngine, list[WireModel]]:
    bus = EventBus()
    seen: list[WireModel] = []
    bus.subscribe(seen.append)
    engine = HookEngine(hooks, bus=bus, session_id="s1", work_dir=str(tmp), run_command=run_shell_command)
    return engine, seen


def test_blocking_hook_gives_its_reason_and_sees_the_event(tmp_path: Path):
    record = tmp_path / "input.json"
    hooks = (
        Hook("PreToolUse", matcher="^Shell$", command=f"cat > {record}; echo 'no shell today' >&2; exit 2"),
        Hook("PreToolUse", matcher="Write", command="exit 2"),
        Hook("PreToolUse", command="exit 0"),
    )
    engine, seen = engine_with(*hooks, tmp=tmp_path)
    decision = anyio.run(engine.run, "PreToolUse", "Shell", {"tool_input": {"command": "ls"}})
    assert decision == HookDecision("block", "no shell today")
    data = json.loads(record.read_text())
    assert (
        data["event"] == "PreToolUse"
        and data["target"] == "Shell"
        and data["tool_input"] == {"command": "ls"}
    )
    assert isinstance(seen[0], HookTriggered) and seen[0].hook_count == 2
    assert (
        isinstance(seen[1], HookResolved) and seen[1].action == "block" and seen[1].reason == "no shell today"
    )


def test_failing_or_slow_hooks_allow(tmp_path: Path):
    engine, _ = engine_with(
        Hook("Stop", command="exit 1"), Hook("Stop", command="sleep 5", timeout=0.3), tmp=tmp_path
    )
    assert anyio.run(engine.run, "Stop", "", None) == HookDecision()


def test_no_matching_hook_emits_nothing(tmp_path: Path):
    engine, seen = engine_with(Hook("PreToolUse", matcher="Glob", command="exit 2"), tmp=tmp_path)
    assert anyio.run(engine.run, "PreToolUse", "Shell", None) == HookDecision()
    assert seen == []


def test_describe_and_subscriptions(tmp_path: Path):
    engine, _ = engine_with(Hook("Stop", command="true"), Hook("Bogus", command="true"), tmp=tmp_path)
    engine.subscribe([{"id": "a", "event": "PreToolUse"}, {"id": "b", "event": "NotAnEvent"}])
    info = engine.describe()
    assert info["configured"] == {"Stop": 1, "PreToolUse": 1}  # configured and subscribed
    assert "PreToolUse" in info["supported_events"] and len(info["supported_events"]) == 13
    assert engine.has("PreToolUse") and not engine.has("SessionEnd")
