"""`query()` / `prompt()` against the real `soulwire --wire` with the scripted model: typed
messages, the permission callback, limits and budgets, and the blocking mirror."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import pytest

import soulwire.sdk as sdk
from soulwire.sdk import sync
from soulwire.sdk.permissions import UPDATED_INPUT_REFUSED

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


@sdk.tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@sdk.tool
async def hang() -> str:
    """Never returns (until cancelled)."""
    await anyio.sleep_forever()
    return ""


def engines_using(config: Path) -> list[int]:
    """Live processes whose command line names `config` (our engine's, while it runs)."""
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(config).encode() in cmdline and state != "Z":
                pids.append(int(entry.name))
    return pids


async def collect(*args: Any, **kwargs: Any) -> list[sdk.Message]:
    return [m async for m in sdk.query(*args, **kwargs)]


async def test_query_yields_merged_typed_messages_and_a_result(soulwire: Engine):
    options = sdk.Options(
        **soulwire.options(
            "think: let me\nthink: add\n"
            + call("c1", "add", {"a": 2, "b": 3})
            + "\nusage: input_other=100 output=20",
            "text: The sum\ntext:  is 5.\nusage: input_other=150 output=7",
            tools=[add],
            prices={"*": sdk.ModelPrice(input=2.0, output=10.0)},
            session_id="query-1",
        )
    )
    messages = await collect("what is 2+3?", options)
    kinds = [type(m).__name__ for m in messages]
    assert kinds == [
        "Thinking", "ToolUse", "Status", "ToolResultMessage", "AssistantText", "Status", "ResultMessage",
    ]  # fmt: skip
    thinking, use, _, result_msg, text = messages[:5]
    assert thinking == sdk.Thinking("let meadd", step=1)  # chunks merged by the shared fold
    assert isinstance(use, sdk.ToolUse) and use.name == "add" and use.input == {"a": 2, "b": 3}
    assert isinstance(result_msg, sdk.ToolResultMessage)
    assert result_msg.tool_use_id == "c1" and not result_msg.is_error and result_msg.output == "5"
    assert text == sdk.AssistantText("The sum is 5.", step=2)
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage)
    assert result.stop_reason == "finished" and result.limit is None and not result.is_error
    assert result.text == "The sum is 5."
    assert result.num_steps == 2 and result.num_turns == 1
    assert (result.usage.input_other, result.usage.output) == (250, 27)
    assert result.cost_usd == pytest.approx((250 * 2.0 + 27 * 10.0) / 1e6)
    assert result.session_id == "query-1" and result.duration_s > 0


async def test_prompt_is_the_kimi_style_alias_and_keywords_work(soulwire: Engine):
    assert sdk.prompt is sdk.query
    messages = [m async for m in sdk.prompt("hi", **soulwire.options("text: hello"))]
    assert messages[0] == sdk.AssistantText("hello", step=1)
    last = messages[-1]
    assert isinstance(last, sdk.ResultMessage) and last.text == "hello" and last.cost_usd is None


async def test_leaving_early_closes_the_engine(soulwire: Engine):
    options = soulwire.options(call("h", "hang", {}), tools=[hang])
    async with contextlib.aclosing(sdk.query("go", **options)) as it:
        async for message in it:
            if isinstance(message, sdk.ToolUse):
                assert engines_using(soulwire.sandbox.config_path) != []  # the check can fail
                break
    assert engines_using(soulwire.sandbox.config_path) == []  # closed with the iterator
    with pytest.raises(TypeError, match="unknown option"):
        await collect("x", bogus=1)


async def test_can_use_tool_allows_and_denies_with_reason(soulwire: Engine):
    seen: list[tuple[str, Any, str]] = []

    def can_use_tool(name: str, tool_input: dict[str, Any] | None, context: sdk.ToolPermissionContext):
        seen.append((name, tool_input, context.tool_call_id))
        if "rm " in (tool_input or {}).get("command", ""):
            return sdk.Deny("rm is not allowed here")
        return sdk.Allow()

    options = soulwire.options(
        call("c1", "Shell", {"command": "echo allowed-run"}),
        call("c2", "Shell", {"command": "rm -rf build"}),
        "text: done",
        can_use_tool=can_use_tool,
    )
    messages = await collect("go", **options)
    assert seen == [
        ("Shell", {"command": "echo allowed-run"}, "c1"),
        ("Shell", {"command": "rm -rf build"}, "c2"),
    ]
    results = {m.tool_use_id: m for m in messages if isinstance(m, sdk.ToolResultMessage)}
    assert not results["c1"].is_error and "allowed-run" in str(results["c1"].output)
    assert results["c2"].is_error
    assert "rm is not allowed here" in results["c2"].message + str(results["c2"].output)
    last = messages[-1]
    assert isinstance(last, sdk.ResultMessage) and last.stop_reason == "finished" and last.text == "done"


async def test_allow_with_updated_input_is_refused_not_faked(soulwire: Engine, tmp_path: Path):
    async def can_use_tool(name: str, tool_input: Any, context: sdk.ToolPermissionContext):
        return sdk.Allow(updated_input={"command": "echo swapped"})

    target = soulwire.sandbox.work / "made.txt"
    options = soulwire.options(
        call("c1", "Shell", {"command": f"touch {target}"}), "text: ok", can_use_tool=can_use_tool
    )
    messages = await collect("go", **options)
    result = next(m for m in messages if isinstance(m, sdk.ToolResultMessage))
    assert result.is_error and UPDATED_INPUT_REFUSED in result.message + str(result.output)
    assert not target.exists()  # neither the original nor the "updated" command ran


def test_options_are_checked_early():
    with pytest.raises(sdk.ConfigurationError, match="cannot be combined"):
        sdk.Options(can_use_tool=lambda *a: sdk.Allow(), on_approval=lambda a: True)
    with pytest.raises(sdk.ConfigurationError, match="max_budget_usd needs a price"):
        sdk.Options(max_budget_usd=1.0, model="no-such-model")
    with pytest.raises(sdk.ConfigurationError, match="turn_timeout"):
        sdk.Options(turn_timeout=0)
    with pytest.raises(sdk.ConfigurationError, match="max_turns"):
        sdk.Options(max_turns=0)
    with pytest.raises(sdk.ConfigurationError, match="differ"):
        sdk.Options(max_turns=3, max_steps_per_turn=4)
    with pytest.raises(sdk.ConfigurationError, match="ModelPrice"):
        sdk.Options(prices={"m": 1.0})
    options = sdk.Options(executable="soulwire", max_turns=3, max_budget_usd=1.0, model="kimi-k2")
    argv = options.argv()
    assert argv[argv.index("--max-steps-per-turn") + 1] == "3"
    # copying keeps the adapted callback instead of calling it a conflict
    callback = lambda *a: sdk.Allow()  # noqa: E731
    from dataclasses import replace

    copied = replace(sdk.Options(can_use_tool=callback), model="m")
    assert copied.on_approval is not None and copied.can_use_tool is callback


async def test_max_turns_ends_with_the_step_limit(soulwire: Engine):
    loop = [call(f"c{i}", "add", {"a": i, "b": 1}) for i in range(5)]
    messages = await collect("loop", **soulwire.options(*loop, tools=[add], max_turns=2))
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage)
    assert result.stop_reason == "max_steps_reached" and result.limit == "max_steps"
    assert result.num_steps == 2


async def test_turn_timeout_cancels_and_says_so(soulwire: Engine):
    options = soulwire.options(call("h", "hang", {}), "text: never", tools=[hang], turn_timeout=1.0)
    messages = await collect("go", **options)
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage)
    assert result.stop_reason == "cancelled" and result.limit == "turn_timeout"
    assert any(isinstance(m, sdk.ToolUse) and m.name == "hang" for m in messages)


async def test_budget_stops_the_turn_once_the_cost_reaches_it(soulwire: Engine):
    """The engine enforces max_budget_usd (priced with the SDK's `prices`): the call that
    crossed it is the last, and the tool it asked for does not run."""
    options = soulwire.options(
        call("h", "hang", {}) + "\nusage: input_other=10 output=0",
        "text: never",
        tools=[hang],
        prices={"*": sdk.ModelPrice(input=1_000_000.0, output=0.0)},  # $1 per input token
        max_budget_usd=5.0,
    )
    messages = await collect("go", **options)
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage)
    assert result.stop_reason == "budget_exceeded" and result.limit == "max_budget_usd"
    assert result.cost_usd == pytest.approx(10.0)
    refused = next(m for m in messages if isinstance(m, sdk.ToolResultMessage))
    assert refused.is_error and refused.message.startswith("Not run: the turn budget's usd limit")


async def test_within_budget_finishes(soulwire: Engine):
    options = soulwire.options(
        "text: cheap\nusage: input_other=10 output=0",
        prices={"*": sdk.ModelPrice(input=1.0, output=1.0)},
        max_budget_usd=5.0,
    )
    result = (await collect("go", **options))[-1]
    assert isinstance(result, sdk.ResultMessage) and result.stop_reason == "finished" and result.limit is None


async def test_engine_failure_is_an_error_result(soulwire: Engine):
    messages = await collect("go", **soulwire.options("error: 400 bad request"))
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage) and result.is_error
    assert isinstance(result.error, sdk.SDKError) and result.text == ""


def test_sync_query(soulwire: Engine):
    messages = list(sync.query("hi", **soulwire.options("think: hm\ntext: hello there")))
    kinds = [type(m).__name__ for m in messages if not isinstance(m, sdk.Status)]
    assert kinds == ["Thinking", "AssistantText", "ResultMessage"]
    last = messages[-1]
    assert isinstance(last, sdk.ResultMessage) and last.text == "hello there"
    assert sync.prompt is sync.query


async def test_without_a_callback_approvals_get_the_default_at_once(soulwire: Engine):
    options = soulwire.options(
        call("c1", "Shell", {"command": "echo defaulted"}),
        "text: done",
        approval_default="approve",
        approval_timeout=None,  # without the immediate default this run would wait forever
    )
    with anyio.fail_after(60):
        messages = await collect("go", **options)
    result = next(m for m in messages if isinstance(m, sdk.ToolResultMessage))
    assert not result.is_error and "defaulted" in str(result.output)


def test_sync_query_left_early_closes_the_engine(soulwire: Engine):
    options = soulwire.options(call("h", "hang", {}), tools=[hang])
    for message in sync.query("go", **options):
        if isinstance(message, sdk.ToolUse):
            assert engines_using(soulwire.sandbox.config_path) != []
            break
    assert engines_using(soulwire.sandbox.config_path) == []
