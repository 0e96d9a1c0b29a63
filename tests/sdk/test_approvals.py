"""Approval machinery against the fake protocol peer (which can send ApprovalRequests on
demand): callbacks sync and async, answers from the stream, the timeout default, requests
settled by the engine, and approvals outside any turn."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import soulwire.sdk as sdk
from soulwire.wire.types import TextPart

pytestmark = pytest.mark.anyio


def answers(result: sdk.TurnResult) -> list[str]:
    """The fake engine writes back what it received for each approval: `response:feedback;`."""
    return [a for a in result.text.split(";") if a]


async def test_stream_object_answers(fake):
    async with sdk.Session(**fake("approvals")) as session:
        turn = session.prompt("3")
        seen: list[sdk.Approval] = []
        async for event in turn:
            if isinstance(event, sdk.Approval):
                seen.append(event)
                assert event.sender == "Shell" and event.action == "run command"
                assert event.request.model_extra == {"future_field": {"kept": True}}
                if len(seen) == 1:
                    assert event.approve()
                elif len(seen) == 2:
                    assert event.approve_for_session()
                else:
                    assert event.reject(feedback="not this one")
                    assert not event.approve()  # the first answer wins
        result = turn.result
    assert answers(result) == ["approve:", "approve_for_session:", "reject:not this one"]
    assert [a.answered_by for a in seen] == ["stream"] * 3
    assert result.steps[0].approvals == seen


async def test_sync_callback_runs_off_the_event_loop(fake):
    threads: list[str] = []

    def policy(approval: sdk.Approval) -> str:
        threads.append(threading.current_thread().name)
        return "reject" if "2" in approval.description else "approve"

    async with sdk.Session(**fake("approvals", on_approval=policy)) as session:
        result = await session.prompt("2")
    assert answers(result) == ["approve:", "reject:"]
    assert threads and all(name != threading.main_thread().name for name in threads)
    assert [a.answered_by for a in result.steps[0].approvals] == ["callback", "callback"]


async def test_async_callback_with_feedback_and_failures(fake):
    async def policy(approval: sdk.Approval) -> sdk.ApprovalDecision | bool:
        await asyncio.sleep(0)  # (the scenario: a policy that awaits before it answers)
        if approval.id == "a1":
            return sdk.ApprovalDecision.reject("try again")
        if approval.id == "a2":
            return True
        raise ValueError("policy bug")  # a broken policy rejects instead of hanging

    async with sdk.Session(**fake("approvals", on_approval=policy)) as session:
        result = await session.prompt("3")
    assert answers(result) == ["reject:try again", "approve:", "reject:"]


async def test_unanswered_approval_gets_the_declared_default(fake):
    async with sdk.Session(**fake("approvals", approval_timeout=0.2)) as session:
        result = await asyncio.wait_for(session.prompt("1").wait(), 10)
        approval = result.steps[0].approvals[0]
        assert approval.answered_by == "timeout" and approval.decision == sdk.ApprovalDecision.reject()
    options = fake("approvals", approval_timeout=0.2, approval_default="approve_for_session")
    async with sdk.Session(**options) as session:
        result = await asyncio.wait_for(session.prompt("1").wait(), 10)
    assert answers(result) == ["approve_for_session:"]


async def test_callback_may_leave_it_to_the_stream_and_timeout(fake):
    async with sdk.Session(**fake("approvals", on_approval=lambda a: None, approval_timeout=0.2)) as session:
        result = await asyncio.wait_for(session.prompt("1").wait(), 10)
    assert answers(result) == ["reject:"]


async def test_engine_side_resolution_is_reflected(fake):
    async with sdk.Session(**fake("for_session")) as session:
        turn = session.prompt("go")
        approvals: list[sdk.Approval] = []
        async for event in turn:
            if isinstance(event, sdk.Approval):
                approvals.append(event)
                if event.id == "s1":
                    event.approve_for_session()
    assert turn.result.text == "s2 auto-approved;"
    second = next(a for a in approvals if a.id == "s2")
    assert second.answered and second.answered_by == "engine"
    assert second.decision == sdk.ApprovalDecision.approve_for_session()
    assert not second.approve()  # already settled: nothing is sent


async def test_approval_outside_a_turn(fake):
    seen = asyncio.Event()

    async def policy(approval: sdk.Approval) -> str:
        seen.set()
        return "approve"

    async with sdk.Session(**fake("background_approval", on_approval=policy)) as session:
        await asyncio.wait_for(seen.wait(), 10)
        async with asyncio.timeout(10):  # the policy's answer settles the request
            while session.pending_approvals:
                await asyncio.sleep(0.01)


async def test_approval_answered_from_another_thread(fake):
    async with sdk.Session(**fake("approvals")) as session:
        turn = session.prompt("1")
        async for event in turn:
            if isinstance(event, sdk.Approval):
                await asyncio.to_thread(event.reject, "from a thread")
                await asyncio.wait_for(event.wait(), 5)
    assert answers(turn.result) == ["reject:from a thread"]


async def test_forward_compatible_stream(fake):
    async with sdk.Session(**fake("future")) as session:
        assert session.server is not None and session.server.name == "Fake"
        assert session.initialize_result is not None and session.initialize_result["future_key"] == 1
        turn = session.prompt("go")
        events = [event async for event in turn]
    unknown = [e for e in events if isinstance(e, sdk.UnknownMessage)]
    assert [u.type for u in unknown] == ["HologramBegin", "ContentPart", "StepBegin"]
    assert unknown[0].payload == {"depth": 3}
    status = next(e for e in events if type(e).__name__ == "StatusUpdate")
    assert status.model_extra == {"quantum_usage": 0.5}
    result_event = next(e for e in events if type(e).__name__ == "ToolResult")
    block = result_event.return_value.display[0]
    assert block.type == "sparkles" and block.data == {"level": 9}
    texts = [e.text for e in events if isinstance(e, TextPart)]
    assert texts == ["known", "mystery answered with -32601"]
    assert turn.result.status == "finished"


async def test_handshake_declares_version_capabilities_and_tools(fake):
    @sdk.tool
    def noop() -> None:
        """Does nothing."""

    options = fake("hello", tools=[noop], on_question=lambda q: {})
    async with sdk.Session(**options) as session:
        hello = json.loads((await session.prompt("x")).text)
    assert hello["protocol_version"] == sdk.SDK_PROTOCOL_VERSION == "1.10"
    assert hello["client"]["name"] == "soulwire-sdk-python"
    assert hello["capabilities"] == {
        "supports_question": True,
        "supports_plan_mode": False,
        "supports_checkpoints": True,
        "supports_budget": True,
        "supports_model_switch": True,
    }
    assert hello["external_tools"][0]["name"] == "noop"


async def test_engine_without_initialize_still_works(fake):
    @sdk.tool
    def noop() -> None:
        """Does nothing."""

    async with sdk.Session(**fake("no_initialize", tools=[noop])) as session:
        assert session.server is None and session.initialize_result is None
        assert "noop" in session.rejected_tools
        assert (await session.prompt("1")).status == "finished"


async def test_questions_by_callback_stream_and_timeout(fake):
    async def choose(question: sdk.Question) -> dict[str, str]:
        return {question.questions[0].question: question.questions[0].options[1].label}

    async with sdk.Session(**fake("question", on_question=choose)) as session:
        assert json.loads((await session.prompt("q")).text) == {"Which colour?": "blue"}
    async with sdk.Session(**fake("question")) as session:
        turn = session.prompt("q")
        async for event in turn:
            if isinstance(event, sdk.Question):
                assert event.answer({"Which colour?": "red"})
        assert json.loads(turn.result.text) == {"Which colour?": "red"}
    async with sdk.Session(**fake("question", approval_timeout=0.2)) as session:
        result = await asyncio.wait_for(session.prompt("q").wait(), 10)
        assert json.loads(result.text) == {}
        assert result.steps[0].events[0].answered_by == "timeout"


async def test_invalid_options_are_configuration_errors(tmp_path):
    with pytest.raises(sdk.ConfigurationError, match="cannot be combined"):
        sdk.Session(session_id="x", continue_session=True)
    with pytest.raises(sdk.ConfigurationError, match="work_dir is not a directory"):
        await sdk.Session(work_dir=tmp_path / "missing").start()
