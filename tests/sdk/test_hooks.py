"""Hooks as Python callables against the real `soulwire --wire` (scripted model): block,
amend (the Soulwire `updated_input` extension), prompt refusal, Stop continuation, failing
hooks, and the option checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import soulwire.sdk as sdk
from soulwire.sdk.hooks import AMEND_UNSUPPORTED, HookDispatcher, as_hooks

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


async def run(engine: Engine, prompt: str, *scripts: str, **extra: Any) -> list[sdk.Message]:
    options = sdk.Options(**engine.options(*scripts, yolo=True, **extra))
    return [m async for m in sdk.query(prompt, options)]


def results(messages: list[sdk.Message]) -> list[sdk.ToolResultMessage]:
    return [m for m in messages if isinstance(m, sdk.ToolResultMessage)]


async def test_pre_tool_use_hook_blocks_a_call_and_sees_its_input(soulwire: Engine):
    seen: list[sdk.HookEvent] = []

    async def guard(event: sdk.HookEvent) -> sdk.Deny | None:
        seen.append(event)
        if "secret" in (event.tool_input or {}).get("command", ""):
            return sdk.Deny("no secrets here")
        return None

    messages = await run(
        soulwire,
        "go",
        call("c1", "Shell", {"command": "echo public"})
        + "\n"
        + call("c2", "Shell", {"command": "cat secret"}),
        "text: done",
        hooks=[sdk.Hook("PreToolUse", guard, matcher="^Shell$")],
    )
    by_id = {r.tool_use_id: r for r in results(messages)}
    assert not by_id["c1"].is_error and "public" in str(by_id["c1"].output)
    assert by_id["c2"].is_error and by_id["c2"].message == "no secrets here"
    assert sorted(e.tool_input["command"] for e in seen if e.tool_input) == ["cat secret", "echo public"]
    assert all(e.event == "PreToolUse" and e.tool_name == "Shell" and e.session_id for e in seen)


async def test_pre_tool_use_hook_amends_the_input(soulwire: Engine):
    def louder(event: sdk.HookEvent) -> sdk.Allow:  # a sync hook runs in a worker thread
        return sdk.Allow(updated_input={"command": "echo amended"})

    messages = await run(
        soulwire,
        "go",
        call("c1", "Shell", {"command": "echo original"}),
        "text: done",
        hooks={"PreToolUse": louder},
    )
    (result,) = results(messages)
    assert not result.is_error and "amended" in str(result.output) and "original" not in str(result.output)
    # the model's recorded call keeps its own arguments; only the run used the new ones
    (use,) = [m for m in messages if isinstance(m, sdk.ToolUse)]
    assert use.input == {"command": "echo original"}


async def test_amending_is_refused_when_the_engine_does_not_announce_it():
    dispatcher = HookDispatcher(as_hooks({"PreToolUse": lambda _e: sdk.Allow(updated_input={"x": 1})}))
    payload = {"id": "r1", "subscription_id": "h1", "event": "PreToolUse", "input_data": {"tool_input": {}}}
    answer = await dispatcher.answer("r1", payload)
    assert answer == {"request_id": "r1", "action": "block", "reason": AMEND_UNSUPPORTED}
    dispatcher.amendable = frozenset({"PreToolUse"})
    answer = await dispatcher.answer("r1", payload)
    assert answer == {"request_id": "r1", "action": "allow", "updated_input": {"x": 1}}


async def test_user_prompt_submit_hook_refuses_a_prompt(soulwire: Engine):
    async def no_deploys(event: sdk.HookEvent) -> sdk.Deny | None:
        return sdk.Deny("deploys need a ticket") if "deploy" in (event.prompt or "") else None

    messages = await run(soulwire, "deploy now", "text: deploying!", hooks={"UserPromptSubmit": [no_deploys]})
    texts = [m.text for m in messages if isinstance(m, sdk.AssistantText)]
    assert "deploying!" not in texts
    assert messages[-1].stop_reason == "finished"  # pyright: ignore[reportAttributeAccessIssue]


async def test_stop_hook_makes_the_agent_continue_once(soulwire: Engine):
    stops: list[bool] = []

    async def check_done(event: sdk.HookEvent) -> sdk.Deny | None:
        stops.append(bool(event.data.get("stop_hook_active")))
        return None if event.data.get("stop_hook_active") else sdk.Deny("also write the tests")

    messages = await run(soulwire, "do it", "text: first", "text: tests written", hooks={"Stop": check_done})
    texts = [m.text for m in messages if isinstance(m, sdk.AssistantText)]
    assert texts == ["first", "tests written"]
    assert stops == [False, True]


async def test_a_failing_guard_blocks_and_a_failing_observer_does_not(soulwire: Engine):
    observed: list[str] = []

    def guard(event: sdk.HookEvent) -> None:
        if "secret" in (event.tool_input or {}).get("command", ""):
            raise RuntimeError("oops")

    def after(event: sdk.HookEvent) -> None:
        observed.append(str(event.data.get("tool_call_id")))
        raise RuntimeError("observer bug")

    messages = await run(
        soulwire,
        "go",
        call("c1", "Shell", {"command": "echo hi"}) + "\n" + call("c2", "Shell", {"command": "cat secret"}),
        "text: done",
        hooks=[sdk.Hook("PreToolUse", guard), sdk.Hook("PostToolUse", after)],
    )
    by_id = {r.tool_use_id: r for r in results(messages)}
    assert not by_id["c1"].is_error and "hi" in str(by_id["c1"].output)
    assert by_id["c2"].is_error and "the client's hook failed: oops" in by_id["c2"].message
    assert observed == ["c1"]
    assert messages[-1].stop_reason == "finished"  # pyright: ignore[reportAttributeAccessIssue]


def test_hook_options_are_checked_early():
    with pytest.raises(sdk.ConfigurationError, match="unknown hook event"):
        sdk.Options(hooks={"BeforeEverything": lambda _e: None})
    with pytest.raises(sdk.ConfigurationError, match="timeout"):
        sdk.Options(hooks=[sdk.Hook("Stop", lambda _e: None, timeout=0)])
    with pytest.raises(sdk.ConfigurationError, match="not callable"):
        sdk.Options(hooks={"Stop": [42]})
    with pytest.raises(sdk.ConfigurationError, match="handshake"):
        sdk.Session(hooks={"Stop": print}, handshake=False)
    assert [h.id for h in as_hooks({"Stop": [print, print], "PreCompact": print})] == ["h1", "h2", "h3"]


async def test_allowed_and_disallowed_tools_are_enforced_by_a_hook(soulwire: Engine):
    messages = await run(
        soulwire,
        "go",
        call("c1", "Shell", {"command": "echo hi"}) + "\n" + call("c2", "ReadFile", {"path": "x"}),
        "text: done",
        allowed_tools=["Shell", "Read.*"],
        disallowed_tools=["ReadFile"],
    )
    by_id = {r.tool_use_id: r for r in results(messages)}
    assert not by_id["c1"].is_error
    assert (
        by_id["c2"].is_error and by_id["c2"].message == "the tool `ReadFile` is not allowed in this session"
    )
    with pytest.raises(sdk.ConfigurationError, match="not a regular expression"):
        sdk.Options(disallowed_tools=["("])


def test_launch_options_reach_the_command_line(tmp_path: Path):
    extra = tmp_path / "extra"
    options = sdk.Options(
        executable="engine",
        add_dirs=[extra],
        agent_file="agent.yaml",
        mcp_config={"mcpServers": {}},
        skills_dirs=[tmp_path],
        plan_mode=True,
    )
    argv = options.argv()
    assert argv[argv.index("--add-dir") + 1] == str(extra)
    assert argv[argv.index("--agent-file") + 1].endswith("agent.yaml")
    assert argv[argv.index("--mcp-config") + 1] == '{"mcpServers": {}}'
    assert argv[argv.index("--skills-dir") + 1] == str(tmp_path) and "--plan" in argv
