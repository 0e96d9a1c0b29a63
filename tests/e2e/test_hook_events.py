"""Hooks over the real engine: `[[hooks]]` shell commands that see the event as JSON and may
block (PreToolUse, UserPromptSubmit, Stop), the ones that only observe (PostToolUse,
PreCompact/PostCompact, SessionStart/SessionEnd), client subscriptions answered through
HookRequest, and what `initialize` reports about them on both start-up paths."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests.tool_calls import call, results
from tests.wire_client import Sandbox, event_types, payloads

V110 = {"protocol_version": "1.10"}


def hook(event: str, command: str, matcher: str = "") -> dict[str, Any]:
    return {"event": event, "command": command, "matcher": matcher}


def recorded(path: Path) -> list[dict[str, Any]]:
    """Payloads a hook appended to `path` (one JSON document per line, via `cat; echo`)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def logging(path: Path, then: str = "exit 0") -> str:
    return f"cat >> {path}; echo >> {path}; {then}"


def context(sandbox: Sandbox) -> list[dict[str, Any]]:
    [path] = sandbox.share.glob("sessions/*/*/context.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_blocking_pre_tool_use_hook_stops_the_call(engine, sandbox):
    log, marker = sandbox.root / "pre.jsonl", sandbox.work / "ran"
    sandbox.config_extra = {
        "hooks": [
            hook("PreToolUse", logging(log, "echo 'no shell today' >&2; exit 2"), matcher="^Shell$"),
            hook("PreToolUse", "exit 2", matcher="Glob"),
            hook("PreToolUse", "exit 0", matcher="Shell"),
        ]
    }
    wire = engine(
        call("s1", "Shell", {"command": f"touch {marker}"}),
        call("g1", "Glob", {"pattern": "*.py"}),
        "text: done",
    )
    wire.initialize(**V110)
    events, response = wire.prompt("go")  # no yolo, yet no approval is asked: the hook came first
    assert response["result"] == {"status": "finished"}
    assert not [m for m in events if m.get("method") == "request"]
    assert payloads(events, "HookTriggered")[0] == {"event": "PreToolUse", "target": "Shell", "hook_count": 2}
    resolved = payloads(events, "HookResolved")[0]
    assert {k: resolved[k] for k in ("event", "target", "action", "reason")} == {
        "event": "PreToolUse", "target": "Shell", "action": "block", "reason": "no shell today",
    }  # fmt: skip
    values = results(events)
    assert values["s1"] == {
        "is_error": True, "output": "", "message": "no shell today",
        "display": [{"type": "brief", "text": "Hook blocked"}], "extras": None,
    }  # fmt: skip
    assert values["g1"]["message"] == "Blocked by PreToolUse hook"  # no reason given
    assert not marker.exists()
    [seen] = recorded(log)
    assert seen["hook_event_name"] == "PreToolUse" and seen["tool_name"] == "Shell"
    assert seen["tool_input"] == {"command": f"touch {marker}"} and seen["tool_call_id"] == "s1"
    assert seen["cwd"] == str(sandbox.work) and seen["session_id"]
    kinds = event_types(events)
    assert kinds[kinds.index("ToolCall") :][:5] == [
        "ToolCall", "StatusUpdate", "HookTriggered", "HookResolved", "ToolResult",
    ]  # fmt: skip


def test_post_tool_use_hooks_see_output_and_errors(engine, sandbox):
    ok_log, failed_log = sandbox.root / "post.jsonl", sandbox.root / "failed.jsonl"
    sandbox.config_extra = {
        "hooks": [hook("PostToolUse", logging(ok_log)), hook("PostToolUseFailure", logging(failed_log))]
    }
    wire = engine(call("s1", "Shell", {"command": "echo hello"}), call("s2", "Shell", {"command": "exit 3"}), "text: ok",
                  args=("--yolo",))  # fmt: skip
    wire.initialize(**V110)
    events, _ = wire.prompt("go")
    assert [p["event"] for p in payloads(events, "HookResolved")] == ["PostToolUse", "PostToolUseFailure"]
    [ok] = recorded(ok_log)
    assert ok["tool_name"] == "Shell" and ok["tool_output"] == "hello\n"
    [failed] = recorded(failed_log)
    assert failed["tool_call_id"] == "s2" and failed["error"] == "Command failed with exit code: 3."


def test_user_prompt_submit_can_refuse_a_prompt(engine, sandbox):
    sandbox.config_extra = {
        "hooks": [hook("UserPromptSubmit", "echo 'no secrets in prompts' >&2; exit 2", matcher="password")]
    }
    wire = engine("text: answered")
    wire.initialize(**V110)
    events, response = wire.prompt("my password is hunter2")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == ["TurnBegin", "HookTriggered", "HookResolved", "ContentPart", "TurnEnd"]
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "no secrets in prompts"}]
    events, _ = wire.prompt("hello")  # not matched: runs, and gets the first script
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "answered"}]
    wire.close()
    assert "hunter2" not in json.dumps(context(sandbox))


def test_a_blocking_stop_hook_runs_one_more_loop(engine, sandbox):
    log = sandbox.root / "stop.jsonl"
    sandbox.config_extra = {"hooks": [hook("Stop", logging(log, "echo 'run the tests too' >&2; exit 2"))]}
    wire = engine("text: first answer", "text: tests pass")
    wire.initialize(**V110)
    events, response = wire.prompt("fix it")
    assert response["result"] == {"status": "finished"}
    assert event_types(events) == [
        "TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "HookTriggered", "HookResolved",
        "StepBegin", "ContentPart", "StatusUpdate", "HookTriggered", "HookResolved", "TurnEnd",
    ]  # fmt: skip
    assert [p["n"] for p in payloads(events, "StepBegin")] == [1, 1]  # a new loop
    assert [p["stop_hook_active"] for p in recorded(log)] == [False, True]  # at most one more loop
    wire.close()
    users = [r["content"] for r in context(sandbox) if r["role"] == "user"]
    assert users == ["fix it", "run the tests too"]


def test_client_subscriptions_are_asked_with_hook_requests(engine):
    wire = engine(
        call("s1", "Shell", {"command": "echo one"}), call("s2", "Shell", {"command": "echo two"}), "text: done",
        args=("--yolo",),
    )  # fmt: skip
    result = wire.initialize(
        **V110, hooks=[{"id": "guard", "event": "PreToolUse", "matcher": "Shell", "timeout": 5}]
    )["result"]
    assert result["hooks"]["configured"] == {"PreToolUse": 1}
    answers = iter(
        [
            {"result": {"action": "block", "reason": "client says no"}},
            {"error": {"code": -32603, "message": "handler crashed"}},  # fail-open: allowed
        ]
    )
    prompt = wire.request("prompt", {"user_input": "go"})
    seen: list[dict[str, Any]] = []
    while (message := wire.recv()) is not None and message.get("id") != prompt:
        seen.append(message)
        if message.get("method") == "request":
            payload = message["params"]["payload"]
            assert message["params"]["type"] == "HookRequest" and message["id"] == payload["id"]
            assert payload["subscription_id"] == "guard" and payload["event"] == "PreToolUse"
            assert payload["target"] == "Shell" and payload["input_data"]["tool_name"] == "Shell"
            wire.send({"jsonrpc": "2.0", "id": message["id"], **next(answers)})
    values = results(seen)
    assert values["s1"]["message"] == "client says no" and values["s1"]["is_error"]
    assert values["s2"]["output"] == "two\n"


def test_initialize_reports_hooks_the_same_on_both_start_paths(engine, sandbox):
    sandbox.config_extra = {
        "hooks": [hook("PreToolUse", "true"), hook("Stop", "true"), hook("Stop", "false")]
    }
    subscriptions = [{"id": "a", "event": "Stop"}, {"id": "b", "event": "NotAHookEvent"}]
    early = engine("text: x").initialize(**V110, hooks=subscriptions)["result"]
    tools = [{"name": "t", "description": "d", "parameters": {"type": "object"}}]
    full = engine("text: x").initialize(**V110, hooks=subscriptions, external_tools=tools)["result"]
    assert early["hooks"]["configured"] == {"PreToolUse": 1, "Stop": 3}
    assert (
        len(early["hooks"]["supported_events"]) == 13 and "PreCompact" in early["hooks"]["supported_events"]
    )
    assert early["capabilities"] == {"supports_question": True, "supports_plan_mode": True}
    drop = ("external_tools", "session")
    assert {k: v for k, v in early.items() if k not in drop} == {
        k: v for k, v in full.items() if k not in drop
    }
    assert list(early) == ["protocol_version", "server", "slash_commands", "hooks", "capabilities", "session"]


def test_session_and_compaction_hooks_observe(engine, sandbox):
    log = sandbox.root / "lifecycle.jsonl"
    sandbox.config_extra = {
        "hooks": [
            hook(event, logging(log)) for event in ("SessionStart", "SessionEnd", "PreCompact", "PostCompact")
        ]
    }
    wire = engine("text: one", "text: two", "text: the summary")
    wire.initialize(**V110)
    wire.prompt("first")
    wire.prompt("second")
    events, _ = wire.prompt("/compact keep it short")
    assert [(p["event"], p["target"]) for p in payloads(events, "HookTriggered")] == [
        ("PreCompact", "manual-with-prompt"), ("PostCompact", "manual-with-prompt"),
    ]  # fmt: skip
    assert wire.close() == 0
    seen = {p["hook_event_name"]: p for p in recorded(log)}
    assert seen["SessionStart"]["source"] == "startup" and seen["SessionEnd"]["reason"] == "exit"
    assert seen["PreCompact"]["token_count"] > 0 and "estimated_token_count" in seen["PostCompact"]


def test_an_unknown_hook_event_is_a_configuration_error(engine, sandbox):
    sandbox.config_extra = {"hooks": [hook("BeforeLunch", "true")]}
    wire = engine("text: x")
    assert wire.close() == 2
    assert "unknown hook event 'BeforeLunch'" in "".join(wire.stderr_lines)


def test_print_mode_runs_hooks_too(sandbox):
    log, marker = sandbox.root / "print.jsonl", sandbox.work / "ran"
    sandbox.config_extra = {
        "hooks": [
            hook("SessionStart", logging(log)),
            hook("PreToolUse", logging(log, "exit 2")),
            hook("SessionEnd", logging(log)),
        ]
    }
    sandbox.scripts = [call("s1", "Shell", {"command": f"touch {marker}"}), "text: blocked, fine"]
    sandbox.write()
    argv = sandbox.argv()
    argv[argv.index("--wire")] = "--print"
    done = subprocess.run(
        [*argv, "-p", "go"], env=sandbox.env(), cwd=sandbox.work, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "blocked, fine" in done.stdout.decode()
    assert not marker.exists()
    assert [p["hook_event_name"] for p in recorded(log)] == ["SessionStart", "PreToolUse", "SessionEnd"]


def test_cancel_during_a_slow_hook_kills_it_and_ends_the_turn(engine, sandbox):
    pidfile = sandbox.root / "hook.pid"
    sandbox.config_extra = {
        "hooks": [hook("PreToolUse", f"echo $$ > {pidfile}; sleep 300", matcher="Shell") | {"timeout": 600}]
    }
    wire = engine(call("s1", "Shell", {"command": "echo never"}), "text: next turn", args=("--yolo",))
    wire.initialize(**V110)
    prompt = wire.request("prompt", {"user_input": "go"})
    while (message := wire.recv()) is not None and (message.get("params") or {}).get(
        "type"
    ) != "HookTriggered":
        pass
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    wire.until_response(wire.request("cancel"))
    _, response = wire.until_response(prompt)  # in 15 s: not the hook's 300 s
    assert response["result"] == {"status": "cancelled"}
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    events, _ = wire.prompt("again")  # the session goes on
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "next turn"}]
