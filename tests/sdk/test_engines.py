"""The SDK's main paths against real engines: `soulwire --wire` always, and the reference
`kimi --wire` too when SOULWIRE_REFERENCE_KIMI points at it (the same tests, unchanged)."""

from __future__ import annotations

import asyncio
import json

import pytest

import soulwire.sdk as sdk
from soulwire.wire.messages import StatusUpdate, StepBegin, TurnBegin, TurnEnd
from soulwire.wire.types import TextPart, ThinkPart, ToolCall

from .conftest import Engine

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str, args: dict[str, object]) -> str:
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(args)})


async def test_streaming_text_thinking_steps_and_usage(any_engine: Engine):
    any_engine.sandbox.capabilities = ["thinking"]
    options = any_engine.options(
        "id: m1\nusage: input_other=100 output=20 input_cache_read=50\nthink: let me\nthink:  think\n"
        "text: Hello\ntext:  world",
        thinking=True,
    )
    async with sdk.Session(**options) as session:
        assert session.server is not None and session.slash_commands
        turn = session.prompt("hi")
        events = [event async for event in turn]
        result = turn.result
    kinds = [type(e) for e in events]
    assert kinds[:2] == [TurnBegin, StepBegin] and kinds[-1] is TurnEnd
    assert [e.think for e in events if isinstance(e, ThinkPart)] == ["let me", " think"]
    assert [e.text for e in events if isinstance(e, TextPart)] == ["Hello", " world"]
    assert result.status == "finished"
    assert [step.n for step in result.steps] == [1]
    assert result.final_text == "Hello world" and result.steps[0].thinking == "let me think"
    assert (result.usage.input_other, result.usage.output, result.usage.input_cache_read) == (100, 20, 50)
    assert result.context_usage == pytest.approx(0.0015)
    assert any(isinstance(e, StatusUpdate) and e.message_id == "m1" for e in events)


async def test_steps_stream_and_external_tools(any_engine: Engine):
    calls: list[str] = []

    @sdk.tool
    def open_file(path: str, line: int = 1) -> str:
        """Open a file in the editor.

        Args:
            path: the file to open
            line: where to put the cursor
        """
        calls.append(f"{path}:{line}")
        return f"opened {path} at {line}"

    @sdk.tool
    async def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"kaboom: {reason}")

    options = any_engine.options(
        "text: let me look\n" + call("c1", "open_file", {"path": "a.py", "line": 3}),
        call("c2", "explode", {"reason": "testing"}),
        "text: all done",
        tools=[open_file, explode],
    )
    async with sdk.Session(**options) as session:
        assert sorted(session.accepted_tools) == ["explode", "open_file"]
        assert session.rejected_tools == {}
        turn = session.prompt("open it")
        seen: list[tuple[int, list[str]]] = []
        async for step in turn.iter_steps():
            seen.append((step.n, [type(e).__name__ async for e in step]))
        result = await turn
    assert [n for n, _ in seen] == [1, 2, 3]
    assert "ToolCall" in seen[0][1] and "ToolResult" in seen[0][1]
    assert calls == ["a.py:3"]
    ok = result.steps[0].tool_results[0].return_value
    assert not ok.is_error and ok.output == "opened a.py at 3"
    failed = result.steps[1].tool_results[0].return_value
    assert failed.is_error and "RuntimeError: kaboom: testing" in failed.message
    assert result.steps[0].tool_calls[0].function.name == "open_file"
    assert result.final_text == "all done"


async def test_cancel_during_external_tool_then_prompt_again(any_engine: Engine):
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @sdk.tool
    async def wait_forever() -> str:
        """Blocks until cancelled."""
        started.set()
        try:
            await asyncio.sleep(3600)  # (the scenario: a tool that runs until cancelled)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    options = any_engine.options(call("w1", "wait_forever", {}), "text: second turn", tools=[wait_forever])
    async with sdk.Session(**options) as session:
        turn = session.prompt("go")
        async for event in turn:
            if isinstance(event, ToolCall):
                await asyncio.wait_for(started.wait(), 10)
                await turn.cancel()
        assert turn.result.status == "cancelled"
        await asyncio.wait_for(cancelled.wait(), 5)
        again = await session.prompt("and now?")
        assert again.status == "finished" and again.final_text == "second turn"


async def test_cancelling_the_awaiting_task_cancels_the_turn(any_engine: Engine):
    started = asyncio.Event()

    @sdk.tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(3600)  # (the scenario: a tool that runs until cancelled)
        return "never"

    options = any_engine.options(call("w1", "slow", {}), "text: still alive", tools=[slow])
    async with sdk.Session(**options) as session:
        turn = session.prompt("go")
        waiter = asyncio.ensure_future(turn.wait())
        await asyncio.wait_for(started.wait(), 10)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        # the next prompt is queued behind the cancelled turn and starts when it has ended
        result = await asyncio.wait_for(session.prompt("next").wait(), 20)
        assert turn.status == "cancelled"
        assert result.final_text == "still alive"


async def test_sequential_prompt_rule(any_engine: Engine):
    async with sdk.Session(**any_engine.options("text: one", "text: two")) as session:
        first = session.prompt("a")
        with pytest.raises(sdk.TurnInProgressError, match="sequential"):
            session.prompt("b")
        with pytest.raises(sdk.TurnNotFinishedError):
            _ = first.result
        assert (await first).final_text == "one"
        assert (await session.prompt("b")).final_text == "two"


async def test_resume_by_session_id_and_replay(any_engine: Engine):
    async with sdk.Session(**any_engine.options("text: noted")) as session:
        session_id = session.id
        assert session_id
        assert (await session.prompt("remember 42")).final_text == "noted"
    async with sdk.Session(**any_engine.options("text: it was 42", session_id=session_id)) as session:
        assert session.id == session_id
        if not any_engine.is_reference:
            assert session.resumed is True
        replay = session.replay()
        history = [event async for event in replay]
        assert replay.result.status == "finished" and replay.result.events == len(history)
        assert [e.user_input for e in history if isinstance(e, TurnBegin)] == ["remember 42"]
        assert "".join(e.text for e in history if isinstance(e, TextPart)) == "noted"
        assert (await session.prompt("what was it?")).final_text == "it was 42"


async def test_max_steps_and_engine_errors(any_engine: Engine):
    options = any_engine.options(
        *(call(f"c{i}", "NoSuchTool", {}) for i in range(2)), "text: recovered", max_steps_per_turn=2
    )
    async with sdk.Session(**options) as session:
        result = await session.prompt("loop")
        assert result.status == "max_steps_reached" and result.step_limit == 2
        with pytest.raises(sdk.LLMNotSupportedError) as info:
            await session.prompt([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}])
        assert info.value.code == -32002
        assert (await session.prompt("still there?")).final_text == "recovered"
        turn = session.prompt("scripts are exhausted now")
        with pytest.raises(sdk.ChatProviderError, match="exhausted"):
            async for _ in turn:
                pass
        assert isinstance(turn.error, sdk.ChatProviderError)


async def test_llm_not_set(any_engine: Engine):
    any_engine.sandbox.config_extra = {"default_model": "", "models": {}, "providers": {}}
    async with sdk.Session(**any_engine.options("text: x")) as session:
        with pytest.raises(sdk.LLMNotSetError):
            await session.prompt("hi")


async def test_shell_approvals_via_callback_and_stream(any_engine: Engine):
    decisions: list[str] = []

    def policy(approval: sdk.Approval) -> sdk.ApprovalDecision | None:
        decisions.append(approval.description)
        if "first" in approval.description:
            return sdk.ApprovalDecision.approve()
        return None  # left to the code reading the stream

    options = any_engine.options(
        call("s1", "Shell", {"command": "echo first"}),
        call("s2", "Shell", {"command": "echo second"}),
        "text: done",
        on_approval=policy,
    )
    async with sdk.Session(**options) as session:
        turn = session.prompt("run them")
        events = []
        async for event in turn:
            events.append(event)
            if isinstance(event, sdk.Approval) and "second" in event.description:
                assert event.reject(feedback="use python instead")
        result = turn.result
    results = {r.tool_call_id: r.return_value for s in result.steps for r in s.tool_results}
    assert not results["s1"].is_error and "first" in str(results["s1"].output)
    assert results["s2"].is_error and "use python instead" in results["s2"].message
    approvals = [e for e in events if isinstance(e, sdk.Approval)]
    assert [a.answered_by for a in approvals] == ["callback", "stream"]
    # The callback and the stream race for the second request (first answer wins), so
    # the callback may or may not have seen it by now.
    assert "first" in decisions[0] and result.final_text == "done"
