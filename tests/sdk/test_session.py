"""Session features against the real `soulwire --wire`: the handshake, steps and retries,
slash-command output, continue, methods the engine lacks, cancelling queued turns."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import soulwire.sdk as sdk
from soulwire.wire import PROTOCOL_VERSION
from soulwire.wire.messages import SteerInput, StepRetry, ToolResult
from soulwire.wire.types import TextPart

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


def slow_tool(started: asyncio.Event) -> sdk.Tool:
    """A tool `slow` that sets `started` and never returns."""

    @sdk.tool
    async def slow() -> str:
        """Slow."""
        started.set()
        await asyncio.sleep(3600)  # (the scenario: a tool that runs until cancelled)
        return ""

    return slow


async def test_handshake_exposes_server_session_and_commands(soulwire: Engine):
    async with sdk.Session(**soulwire.options("text: hi")) as session:
        assert session.server is not None and session.server.name == "Soulwire"
        assert session.protocol_version == PROTOCOL_VERSION
        assert session.info.resumed is False
        assert session.info.work_dir == str(soulwire.sandbox.work)
        assert session.id == session.launch.requested_session_id
        names = {c.name for c in session.slash_commands}
        assert "clear" in names
        assert all(isinstance(c.aliases, list) for c in session.slash_commands)


async def test_retries_are_counted_and_steps_grouped(soulwire: Engine):
    async with sdk.Session(**soulwire.options("error: 500 boom", "text: after retry")) as session:
        turn = session.prompt("go")
        events = [e async for e in turn]
    retry = next(e for e in events if isinstance(e, StepRetry))  # sent because we declared 1.10
    assert retry.status_code == 500 and retry.next_attempt == 2
    step = turn.result.steps[0]
    assert step.retries == 1 and step.text == "after retry"


async def test_slash_command_output_is_step_zero(soulwire: Engine):
    async with sdk.Session(**soulwire.options("text: hello")) as session:
        await session.prompt("hi")
        turn = session.prompt("/clear")
        steps = []
        async for step in turn.iter_steps():
            steps.append((step.n, [e async for e in step]))
    assert [n for n, _ in steps] == [0]
    texts = [e.text for e in steps[0][1] if isinstance(e, TextPart)]
    assert texts == ["The context has been cleared."]
    assert turn.result.final_text == "The context has been cleared."
    assert [e.text async for e in turn.result.steps[0] if isinstance(e, TextPart)] == texts  # recorded


async def test_continue_the_last_session(soulwire: Engine):
    async with sdk.Session(**soulwire.options("text: first")) as session:
        first_id = session.id
        await session.prompt("one")
    async with sdk.Session(**soulwire.options("text: second", continue_session=True)) as session:
        assert session.id == first_id and session.resumed is True
        assert (await session.prompt("two")).final_text == "second"


async def test_methods_the_engine_lacks_raise_not_supported(fake):
    async with sdk.Session(**fake("approvals")) as session:
        with pytest.raises(sdk.NotSupportedError, match="`steer` is not supported by this engine") as info:
            await session.steer("more")
        assert info.value.code == -32601
        with pytest.raises(sdk.NotSupportedError, match="set_plan_mode"):
            await session.set_plan_mode(True)


async def test_steer_plan_mode_and_questions_on_the_real_engine(soulwire: Engine):
    """`steer` from inside a running tool, `set_plan_mode`, and a multi-select question
    answered by the `on_question` callback — against soulwire itself."""
    holder: list[sdk.Session] = []

    @sdk.tool
    async def wait_here() -> str:
        """Blocks while the client steers."""
        await holder[0].steer("also mention steering")
        return "waited"

    async def choose(question: sdk.Question) -> dict[str, str]:
        item = question.questions[0]
        assert item.multi_select
        return {item.question: ", ".join(o.label for o in item.options)}

    ask = {
        "questions": [
            {"question": "Which?", "options": [{"label": "A"}, {"label": "B"}], "multi_select": True}
        ]
    }
    options = soulwire.options(
        call("w1", "wait_here", {}),
        "text: steered answer",
        call("q1", "AskUserQuestion", ask),
        "text: asked",
        tools=[wait_here],
        on_question=choose,
        supports_plan_mode=True,
    )
    async with sdk.Session(**options) as session:
        holder.append(session)
        with pytest.raises(sdk.InvalidStateError, match="No agent turn is in progress"):
            await session.steer("nobody is listening")
        turn = session.prompt("go")
        events = [event async for event in turn]
        assert [e.user_input for e in events if isinstance(e, SteerInput)] == ["also mention steering"]
        assert turn.result.final_text == "steered answer" and [s.n for s in turn.result.steps] == [1, 2]
        assert await session.set_plan_mode(True) is True
        assert await session.set_plan_mode(False) is False
        result = await session.prompt("ask")
        answer = next(e for e in result.steps[0].events if isinstance(e, ToolResult))
        assert json.loads(answer.return_value.output) == {"answers": {"Which?": "A, B"}}


async def test_a_queued_prompt_can_be_cancelled_before_it_is_sent(soulwire: Engine):
    started = asyncio.Event()
    slow = slow_tool(started)

    async with sdk.Session(**soulwire.options(call("s1", "slow", {}), "text: last", tools=[slow])) as session:
        first = session.prompt("one")
        await asyncio.wait_for(started.wait(), 10)
        cancel = asyncio.ensure_future(first.cancel())
        await asyncio.sleep(0)  # one turn of the loop: the cancel has started, not finished
        assert first.cancel_requested
        queued = session.prompt("two")  # allowed: the running turn is being cancelled
        with pytest.raises(sdk.TurnInProgressError, match="already waiting"):
            session.prompt("three")
        await queued.cancel()
        assert queued.status == "cancelled" and queued.steps == []
        await cancel
        assert first.status == "cancelled"
        await first.cancel()  # a finished turn: nothing to do
        third = await session.prompt("three")
        assert third.final_text == "last"


async def test_session_cancel_and_busy(soulwire: Engine):
    started = asyncio.Event()
    slow = slow_tool(started)

    async with sdk.Session(**soulwire.options(call("s1", "slow", {}), tools=[slow])) as session:
        assert not session.busy
        turn = session.prompt("one")
        await asyncio.wait_for(started.wait(), 10)
        assert session.busy
        await session.cancel()
        assert turn.status == "cancelled" and not session.busy
        await session.cancel()  # idle: nothing to cancel


async def test_stderr_callback_and_tail(fake):
    lines: list[str] = []
    with pytest.raises(sdk.EngineExitedError):
        await sdk.Session(**fake("exit_early", on_stderr=lines.append)).start()
    assert "configuration is broken" in "".join(lines)


def test_options_object_keywords_and_early_checks(tmp_path: Path):
    options = sdk.Options(model="m", yolo=True, work_dir=tmp_path, approval_default="approve")
    session = sdk.Session(options, yolo=False)
    assert session.options.model == "m" and session.options.yolo is False and options.yolo is True
    assert "--model" in session.launch.argv() and "--yolo" not in session.launch.argv()
    assert sdk.Session(model="m").options.model == "m"
    with pytest.raises(TypeError, match="unknown option"):
        sdk.Session(modle="m")
    for bad in (
        {"session_id": "a", "continue_session": True},
        {"max_steps_per_turn": 0},
        {"approval_timeout": -1},
        {"startup_timeout": "soon"},
        {"approval_default": "maybe"},
        {"args": "--yolo"},
    ):
        with pytest.raises(sdk.ConfigurationError):
            sdk.Options(**bad)
