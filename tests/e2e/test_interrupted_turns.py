"""A turn cut short — the real engine SIGKILLed, or a client's `cancel` — in each of its shapes:
a tool call waiting for its approval, the model streaming, a Shell command running, a
compaction, a sub-agent (and a background one). Afterwards the records close the turn (an
error result for every call that never got one; after a kill, StepInterrupted, a Notification
and TurnEnd written when the session is opened again), the model sees what happened (its own
reply and calls, an "interrupted" result for each call, a note that the request was not
finished, and the next prompt as a request of its own), nothing recorded is lost and nothing
is recorded twice. The model is a real HTTP server speaking Chat Completions, so the test
reads what the engine really sent it."""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.test_faults_lifetime import processes_with, wait_for
from tests.fake_llm_server import FakeLLMServer, Reply
from tests.provider_streams import Answer, Call, error_reply, stream_reply
from tests.wire_client import Sandbox, WireProcess, event_types, payloads

from soulwire.sessions.paths import session_dir

SESSION = "s-1"
ENGINE_STOPPED = "interrupted: the engine stopped before this call finished"
CANCELLED = "interrupted: the turn was cancelled before this call finished"
LONG_ANSWER = ("The sub-agent looked around and found nothing to change here. " * 5).strip()


def text(*chunks: str, **usage: int) -> Reply:
    answer = Answer(message_id="m", text=list(chunks))
    answer.usage.update(usage)
    return stream_reply("openai_legacy", answer)


def calls(*tool_calls: tuple[str, str, dict[str, Any]], say: str = "") -> Reply:
    made = [Call(i, name, [json.dumps(args)]) for i, name, args in tool_calls]
    return stream_reply("openai_legacy", Answer(message_id="m", text=[say] if say else [], calls=made))


def stalled(*chunks: str) -> Reply:
    """A reply that stops after its first text chunk and never ends (until the test does)."""
    return stream_reply("openai_legacy", Answer(message_id="m", text=list(chunks), cut="stall"))


@dataclass
class Rig:
    sandbox: Sandbox
    server: FakeLLMServer
    loop_control: dict[str, Any]
    config_extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def start(self, *args: str) -> WireProcess:
        sandbox = self.sandbox
        sandbox.work.mkdir(parents=True, exist_ok=True)
        sandbox.home.mkdir(parents=True, exist_ok=True)
        config = {
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "test-model", "max_context_size": 100_000}},
            "providers": {
                "p": {"type": "openai_legacy", "base_url": self.server.url + "/v1", "api_key": "sk-t"}
            },
            "loop_control": {"max_retries_per_step": 1, **self.loop_control},
            **self.config_extra,
        }
        sandbox.config_path.write_text(json.dumps(config), encoding="utf-8")
        wire = WireProcess(sandbox.argv("--session", SESSION, *args), sandbox.env(), sandbox.work)
        wire.initialize(protocol_version="1.10")
        return wire

    @property
    def dir(self) -> Path:
        return session_dir(self.sandbox.share, self.sandbox.work, SESSION)


@pytest.fixture
def rig(sandbox: Sandbox) -> Iterator[Rig]:
    with FakeLLMServer() as server:
        yield Rig(sandbox, server, {})


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wire_messages(path: Path) -> list[dict[str, Any]]:
    return [r["message"] for r in map(json.loads, lines(path)) if "message" in r]


def assert_well_formed(messages: list[dict[str, Any]]) -> None:
    """Every turn ends, and every tool call has exactly one result (sub-agents' too)."""
    levels: dict[Any, list[dict[str, Any]]] = {None: []}
    for message in messages:
        if message["type"] == "SubagentEvent":
            levels.setdefault(message["payload"]["agent_id"], []).append(message["payload"]["event"])
        else:
            levels[None].append(message)
    for level, events in levels.items():
        kinds = [e["type"] for e in events]
        assert kinds.count("TurnBegin") == kinds.count("TurnEnd"), (level, kinds)
        called = [e["payload"]["id"] for e in events if e["type"] == "ToolCall"]
        answered = [e["payload"]["tool_call_id"] for e in events if e["type"] == "ToolResult"]
        assert sorted(called) == sorted(answered), (level, kinds)


def closing_results(messages: list[dict[str, Any]], why: str) -> dict[str, str]:
    """The interrupted results among `messages` (wrapped ones included), by tool call id."""
    found: dict[str, str] = {}
    for message in messages:
        if message["type"] == "SubagentEvent":
            message = message["payload"]["event"]
        if message["type"] == "ToolResult" and message["payload"]["return_value"]["message"] == why:
            found[message["payload"]["tool_call_id"]] = message["payload"]["return_value"]["message"]
    return found


def model_view(rig: Rig, prompt: str) -> list[dict[str, Any]]:
    """The messages the engine sent the model for the request that carries `prompt`."""
    for body in reversed(rig.server.bodies()):
        if isinstance(body, dict) and prompt in json.dumps(body.get("messages", [])):
            return body["messages"]
    raise AssertionError(f"no request carried {prompt!r}")


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


@dataclass
class Shape:
    """One way a turn is running when it is cut short."""

    name: str
    replies: list[Reply]
    until: Callable[[dict[str, Any]], bool]
    """The message after which the turn is cut short."""
    calls: list[str]
    """Ids of the parent's tool calls that the interruption leaves without a result."""
    inner_calls: list[str]
    args: tuple[str, ...] = ()
    loop_control: dict[str, Any] | None = None
    first: list[Reply] | None = None
    """Replies of a turn run before the one that is cut short."""
    process: str | None = None
    """Wait for a process with this in its command line before cutting the turn short."""
    again: list[Reply] | None = None
    """Replies of the next turn, before its answer (a compaction that is still due)."""


def is_event(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m.get("method") == "event" and m["params"]["type"] == kind


def is_request(m: dict[str, Any]) -> bool:
    return m.get("method") == "request"


def shapes() -> list[Shape]:
    sleep = f"30.{random.randrange(10**8):08d}"
    return [
        Shape(
            "approval",
            [calls(("c1", "Shell", {"command": "echo hi"}), say="let me look")],
            is_request,
            ["c1"],
            [],
        ),
        Shape("streaming", [stalled("half an ans", "wer")], is_event("ContentPart"), [], []),
        Shape(
            "tool",
            [calls(("c1", "Shell", {"command": f"sleep {sleep}"}), say="running it")],
            is_event("ToolCall"),
            ["c1"],
            [],
            args=("--yolo",),
            process=sleep,
        ),
        Shape(
            "compaction",
            [stalled("a summ", "ary")],
            is_event("CompactionBegin"),
            [],
            [],
            loop_control={"compaction_trigger_ratio": 0.5, "reserved_context_size": 1000},
            first=[text("answer one", input_other=60_000)],
            again=[text("the summary")],
        ),
        Shape(
            "subagent",
            [
                calls(("a1", "Agent", {"description": "look", "prompt": "look around"})),
                calls(("s1", "Shell", {"command": "echo sub"})),
            ],
            is_request,
            ["a1"],
            ["s1"],
        ),
    ]


SHAPES = {s.name: s for s in shapes()}


def interrupt(wire: WireProcess, prompt_id: str, ending: str) -> list[dict[str, Any]]:
    """Kill the engine (its whole process group), or cancel the turn and wait for its end."""
    if ending == "kill":
        os.killpg(wire.proc.pid, signal.SIGKILL)
        wire.proc.wait(timeout=10)
        return []
    wire.request("cancel")
    events, response = wire.until_response(prompt_id, timeout=30)
    assert response["result"] == {"status": "cancelled"}
    return events


@pytest.mark.parametrize("ending", ["kill", "cancel"])
@pytest.mark.parametrize("shape_name", list(SHAPES))
def test_a_turn_cut_short_is_closed_and_the_model_is_told(rig: Rig, shape_name: str, ending: str):
    shape = SHAPES[shape_name]
    rig.loop_control = shape.loop_control or {}
    if shape.first:
        rig.server.queue(*shape.first)
    rig.server.queue(*shape.replies)
    wire = rig.start(*shape.args)
    if shape.first:
        _, response = wire.prompt("do zero")
        assert response["result"]["status"] == "finished"
    prompt_id = wire.request("prompt", {"user_input": "do A"})
    while not shape.until(message := wire.recv(timeout=30) or {}):
        assert message, "".join(wire.stderr_lines)
    if shape.process is not None:
        assert wait_for(lambda: processes_with(shape.process or ""), limit=20), "the command never started"
    live = interrupt(wire, prompt_id, ending)
    why = ENGINE_STOPPED if ending == "kill" else CANCELLED
    if ending == "cancel":
        assert_well_formed(wire_messages(rig.dir / "wire.jsonl"))
        assert event_types(live)[-1] == "TurnEnd"
        live_events = [m["params"] for m in live if m.get("method") == "event"]
        assert set(closing_results(live_events, CANCELLED)) == {*shape.calls, *shape.inner_calls}
        wire.close()
    else:
        assert wire_messages(rig.dir / "wire.jsonl")[-1]["type"] != "TurnEnd"
    wire_before, context_before = lines(rig.dir / "wire.jsonl"), lines(rig.dir / "context.jsonl")

    # Open the session again (twice: closing is done once) and prompt.
    rig.server.reset()
    rig.server.queue(*(shape.again or []), text("fine"))
    wire = rig.start()
    wire.close()
    wire = rig.start()
    replayed, response = wire.until_response(wire.request("replay"))
    assert "result" in response
    events, response = wire.prompt("do B")
    assert response["result"] == {"status": "finished"}
    assert "Traceback" not in "".join(wire.stderr_lines)
    wire.close()

    records = wire_messages(rig.dir / "wire.jsonl")
    assert lines(rig.dir / "wire.jsonl")[: len(wire_before)] == wire_before  # nothing lost
    compacted = rig.dir / "context_1.jsonl"  # (the next turn's compaction archived it whole)
    context_now = lines(compacted if compacted.exists() else rig.dir / "context.jsonl")
    assert context_now[: len(context_before)] == context_before
    assert_well_formed(records)  # nothing missing, nothing twice
    closed = records[: len(records) - len(event_types_of(events))]
    assert set(closing_results(closed, why)) == {*shape.calls, *shape.inner_calls}
    if ending == "kill":
        kinds = [m["type"] for m in closed]
        assert kinds[-3:] == ["StepInterrupted", "Notification", "TurnEnd"]
        assert kinds.count("Notification") == 1
        notice = closed[-2]["payload"]
        assert notice["type"] == "turn.interrupted" and "engine stopped" in notice["body"]
        assert [e["params"]["type"] for e in replayed][-3:] == ["StepInterrupted", "Notification", "TurnEnd"]
        if shape.name == "compaction":
            assert "CompactionEnd" in kinds[kinds.index("CompactionBegin") :]

    # What the model was sent with the next prompt: the cut-short request and what it did,
    # a note that it was interrupted, then the new prompt as a request of its own.
    view = model_view(rig, "do B")
    new = next(i for i, m in enumerate(view) if m["role"] == "user" and "do B" in content_text(m))
    assert content_text(view[new]) == "do B"
    notes = [i for i, m in enumerate(view[:new]) if "<system>Interrupted: " in content_text(m)]
    assert len(notes) == 1
    assert ("engine stopped" if ending == "kill" else "cancelled") in content_text(view[notes[0]])
    asked = [i for i, m in enumerate(view) if m["role"] == "user" and "do A" in content_text(m)]
    assert asked == [] if shape.name == "compaction" else asked[0] <= notes[0]  # (compaction: summarised)
    if shape.calls:
        (assistant,) = [m for m in view[asked[0] : new] if m["role"] == "assistant"]
        assert [c["id"] for c in assistant["tool_calls"]] == shape.calls
        results = {m["tool_call_id"]: content_text(m) for m in view[asked[0] : new] if m["role"] == "tool"}
        assert results == {c: f"<system>ERROR: {why}</system>" for c in shape.calls}
    for agent in (rig.dir / "subagents").glob("*") if shape.inner_calls else ():
        assert_well_formed(wire_messages(agent / "wire.jsonl"))
        context = [json.loads(line) for line in lines(agent / "context.jsonl")]
        assert context[-1]["role"] == "user" and "<system>Interrupted: " in json.dumps(context[-1])


def event_types_of(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["type"] for m in messages if m.get("method") == "event"]


def test_a_killed_background_agent_is_closed_when_it_is_resumed(rig: Rig, sandbox: Sandbox):
    rig.loop_control = {"max_steps_per_turn": 1}  # the parent's turn ends with the Agent call
    start = {"description": "look", "prompt": "look around", "run_in_background": True}
    rig.server.queue(calls(("bg", "Agent", start)), calls(("s1", "Shell", {"command": "echo sub"})))
    wire = rig.start()
    events, response = wire.prompt("start it")
    assert response["result"]["status"] == "max_steps_reached"
    (started,) = payloads(events, "ToolResult")
    agent_id = next(
        line.split(": ", 1)[1]
        for line in started["return_value"]["output"].splitlines()
        if line.startswith("agent_id")
    )
    # the background sub-agent's Shell waits for its approval (asked before or after the answer)
    if not any(is_request(m) for m in events):
        while not is_request(wire.recv(timeout=30) or {"method": "request"}):
            pass
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)
    agent_dir = rig.dir / "subagents" / agent_id
    before = lines(agent_dir / "wire.jsonl")
    assert wire_messages(agent_dir / "wire.jsonl")[-1]["type"] != "TurnEnd"

    rig.server.reset()
    rig.server.queue(
        calls(("r1", "Agent", {"description": "again", "prompt": "go on", "resume": agent_id})),
        text(LONG_ANSWER),
    )
    wire = rig.start()
    events, response = wire.prompt("resume it")
    assert response["result"]["status"] == "max_steps_reached"
    (resumed,) = payloads(events, "ToolResult")
    assert not resumed["return_value"]["is_error"], resumed
    wire.close()

    records = wire_messages(agent_dir / "wire.jsonl")
    assert lines(agent_dir / "wire.jsonl")[: len(before)] == before
    assert_well_formed(records)
    assert set(closing_results(records, ENGINE_STOPPED)) == {"s1"}
    kinds = [m["type"] for m in records]
    assert kinds.count("TurnBegin") == 2 and kinds[kinds.index("TurnEnd") - 1] == "Notification"
    view = model_view(rig, "go on")  # what the resumed sub-agent's model call carried
    assert [m["role"] for m in view][-4:] == ["assistant", "tool", "user", "user"]
    assert content_text(view[-3]) == f"<system>ERROR: {ENGINE_STOPPED}</system>"
    assert content_text(view[-2]).startswith("<system>Interrupted: the engine stopped")


def test_a_provider_error_in_the_resumed_turn_is_an_answer_not_a_traceback(rig: Rig):
    rig.server.queue(calls(("c1", "Shell", {"command": "echo hi"})))
    wire = rig.start()
    prompt_id = wire.request("prompt", {"user_input": "do A"})
    while not is_request(wire.recv(timeout=30) or {"method": "request"}):
        pass
    interrupt(wire, prompt_id, "kill")
    rig.server.reset()
    rig.server.queue(error_reply("openai_legacy", 500, "the provider is down"))
    wire = rig.start()
    _, response = wire.prompt("do B")
    assert response["error"]["code"] == -32003 and "the provider is down" in response["error"]["message"]
    assert wire.close() == 0
    assert "Traceback" not in "".join(wire.stderr_lines), "".join(wire.stderr_lines)
