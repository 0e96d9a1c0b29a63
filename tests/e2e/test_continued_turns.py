"""A turn a killed engine left waiting for approvals, continued by the host that takes the
session over (`SessionOptions.continue_turn`: what `serve` opens sessions with; the CLI's
resume closes the turn instead, tests/e2e/test_interrupted_turns.py).

The real engine runs the turn's first step as a process and is SIGKILLed mid-step: one call
approved and finished, one approved and running, one still waiting for its approval. Then the
session is opened in this process, as `serve` opens it, and continued: the waiting approval is
asked again under the same request id, the finished call keeps its result, the running one is
told it was interrupted, the approved call runs, and the model's next step sees all three
results — one turn in the record, every message once. A turn killed during the model's call
is closed as before."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from tests.e2e.test_faults_lifetime import processes_with, wait_for
from tests.e2e.test_interrupted_turns import (
    ENGINE_STOPPED,
    SESSION,
    Rig,
    assert_well_formed,
    calls,
    content_text,
    is_event,
    is_request,
    model_view,
    stalled,
    text,
    wire_messages,
)
from tests.fake_llm_server import FakeLLMServer
from tests.wire_client import Sandbox

from soulwire.runtime.builder import Runtime, build_runtime
from soulwire.runtime.options import SessionOptions
from soulwire.wire.messages import ApprovalRequest
from soulwire.wire.types import WireModel


@pytest.fixture
def rig(sandbox: Sandbox) -> Iterator[Rig]:
    with FakeLLMServer() as server:
        yield Rig(sandbox, server, {})


class Approving:
    """A client that approves every request and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def request(self, message: WireModel) -> Any:
        assert isinstance(message, ApprovalRequest)
        self.asked.append(message)
        return {"request_id": message.id, "response": "approve"}


def taken_over(rig: Rig) -> Runtime:
    """The session opened as `serve` opens it (in this process, on the same files)."""
    config = json.loads(rig.sandbox.config_path.read_text(encoding="utf-8"))
    options = SessionOptions(
        rig.sandbox.work, rig.sandbox.share, config, session_id=SESSION, continue_turn=True
    )
    return build_runtime(options)


def kill(rig: Rig, wire: Any) -> None:
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)
    assert wire_messages(rig.dir / "wire.jsonl")[-1]["type"] != "TurnEnd"


def test_a_turn_waiting_for_an_approval_is_continued_where_it_stopped(rig: Rig):
    sleep = "31.4159"
    rig.server.queue(
        calls(
            ("c1", "Shell", {"command": "echo one"}),
            ("c2", "Shell", {"command": f"sleep {sleep}"}),
            ("c3", "Shell", {"command": "echo three"}),
            say="three commands",
        )
    )
    wire = rig.start()
    wire.request("prompt", {"user_input": "do A"})
    requests: dict[str, dict[str, Any]] = {}
    while len(requests) < 3:
        message = wire.recv(timeout=30)
        assert message, "".join(wire.stderr_lines)
        if is_request(message):
            requests[message["params"]["payload"]["tool_call_id"]] = message
    for call_id in ("c1", "c2"):  # c3 is never answered by this process
        asked = requests[call_id]
        wire.respond(asked["id"], {"request_id": asked["params"]["payload"]["id"], "response": "approve"})
    while not (is_event("ToolResult")(message := wire.recv(timeout=30) or {})):
        assert message, "".join(wire.stderr_lines)
    assert message["params"]["payload"]["tool_call_id"] == "c1"
    assert wait_for(lambda: processes_with(sleep), limit=20), "c2 never started"
    kill(rig, wire)

    rig.server.reset()
    rig.server.queue(text("all done"))
    runtime = taken_over(rig)
    try:
        plan = runtime.continuation
        assert plan is not None and plan.step == 1 and list(plan.results) == ["c1"]
        assert plan.asked == {"c3": requests["c3"]["params"]["payload"]["id"]} and plan.interrupted == ["c2"]
        client = Approving()
        runtime.attach_client(client)

        async def go() -> str:
            async with runtime.running():
                assert plan is not None
                return (await runtime.soul.continue_turn(plan)).status

        assert anyio.run(go) == "finished"
    finally:
        runtime.close()
    asked = [(a.id, a.tool_call_id, a.description) for a in client.asked]
    before = requests["c3"]["params"]["payload"]
    assert asked == [(before["id"], "c3", before["description"])]  # asked again, as it was

    messages = wire_messages(rig.dir / "wire.jsonl")
    assert_well_formed(messages)
    kinds = [m["type"] for m in messages]
    assert kinds.count("TurnBegin") == 1 and kinds.count("TurnEnd") == 1 and kinds[-1] == "TurnEnd"
    results = {
        m["payload"]["tool_call_id"]: m["payload"]["return_value"]
        for m in messages
        if m["type"] == "ToolResult"
    }
    assert [m["payload"]["tool_call_id"] for m in messages if m["type"] == "ToolResult"] == ["c1", "c2", "c3"]
    assert "one" in results["c1"]["output"] and "three" in results["c3"]["output"]
    assert results["c2"]["message"] == ENGINE_STOPPED
    assert [m["payload"]["n"] for m in messages if m["type"] == "StepBegin"] == [1, 2]
    notice = next(m["payload"] for m in messages if m["type"] == "Notification")
    assert notice["type"] == "turn.resumed" and notice["payload"] == {
        "reason": "the engine stopped",
        "asked": ["c3"],
        "interrupted": ["c2"],
    }

    view = model_view(rig, "do A")  # the continued step's model call
    tools = {m["tool_call_id"]: content_text(m) for m in view if m["role"] == "tool"}
    assert "one" in tools["c1"] and "three" in tools["c3"] and "interrupted" in tools["c2"]
    assert [m["role"] for m in view][-4:] == ["assistant", "tool", "tool", "tool"]

    wire = rig.start()  # opened again by the CLI: nothing left to close or continue
    rig.server.queue(text("fine"))
    _, response = wire.prompt("do B")
    assert response["result"] == {"status": "finished"}
    wire.close()
    kinds = [m["type"] for m in wire_messages(rig.dir / "wire.jsonl")]
    assert kinds.count("TurnBegin") == 2 and kinds.count("TurnEnd") == 2 and kinds.count("ToolResult") == 3


def test_a_turn_killed_in_its_model_call_is_closed_by_the_host_that_takes_it_over(rig: Rig):
    rig.server.queue(stalled("half an ans", "wer"))
    wire = rig.start()
    wire.request("prompt", {"user_input": "do A"})
    while not is_event("ContentPart")(message := wire.recv(timeout=30) or {}):
        assert message, "".join(wire.stderr_lines)
    kill(rig, wire)

    runtime = taken_over(rig)
    try:
        assert runtime.continuation is None and runtime.interrupted_turn
    finally:
        runtime.close()
    messages = wire_messages(rig.dir / "wire.jsonl")
    assert_well_formed(messages)
    assert [m["type"] for m in messages][-3:] == ["StepInterrupted", "Notification", "TurnEnd"]
    notice = messages[-2]["payload"]
    assert (
        notice["type"] == "turn.interrupted" and notice["payload"]["lost"] == "the model's reply in progress"
    )
    assert notice["body"].endswith("; lost: the model's reply in progress.")


def test_a_continued_turn_goes_on_with_what_it_had_spent_against_the_turn_budget(rig: Rig):
    """The turn's budget is the whole turn's, across the kill: 170 tokens before it, 170
    after; a turn limit of 300 stops the tool call of the continued step (a fresh turn tally
    would have run it)."""
    rig.config_extra["budgets"] = {"turn": {"tokens": 300}}
    rig.server.queue(calls(("c1", "Shell", {"command": "echo one"}), say="one command"))
    wire = rig.start()
    wire.request("prompt", {"user_input": "do A"})
    while not is_request(message := wire.recv(timeout=30) or {}):
        assert message, "".join(wire.stderr_lines)
    state = json.loads((rig.dir / "state.json").read_text(encoding="utf-8"))
    assert state["budget_spent"].get("turn", {}).get("tokens") == 170, state  # kept while the turn is open
    kill(rig, wire)

    rig.server.reset()
    rig.server.queue(calls(("c2", "Shell", {"command": "echo two"})), text("done"))
    runtime = taken_over(rig)
    try:
        plan = runtime.continuation
        assert plan is not None and list(plan.asked) == ["c1"]
        runtime.attach_client(Approving())

        async def go() -> None:
            async with runtime.running():
                assert plan is not None
                await runtime.soul.continue_turn(plan)

        anyio.run(go)
    finally:
        runtime.close()
    results = {
        m["payload"]["tool_call_id"]: m["payload"]["return_value"]
        for m in wire_messages(rig.dir / "wire.jsonl")
        if m["type"] == "ToolResult"
    }
    assert "one" in results["c1"]["output"]  # asked again and run: 170 tokens so far
    assert results["c2"]["is_error"] and "turn budget's tokens limit" in results["c2"]["message"]
    assert "two" not in json.dumps(results["c2"])
    state = json.loads((rig.dir / "state.json").read_text(encoding="utf-8"))
    assert state["budget_spent"]["session"]["tokens"] == 340 and "turn" not in state["budget_spent"]
