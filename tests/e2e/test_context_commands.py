"""Context management over Wire: automatic compaction inside a turn, /compact, /clear,
/yolo, /init, and what they leave in the session files."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from tests.wire_client import Sandbox, event_types, payloads

from soulwire.sessions.paths import session_dir

COMPACTING = {"loop_control": {"compaction_trigger_ratio": 0.5, "reserved_context_size": 1000}}
SUMMARY_HEADER = "<system>Previous context has been compacted. Here is the compaction output:</system>"


def context_file(sandbox: Sandbox, session_id: str, name: str = "context.jsonl") -> Path:
    return session_dir(sandbox.share, sandbox.work, session_id) / name


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_initialize_lists_the_builtin_commands_on_both_start_paths(engine):
    wire = engine("text: x")
    early = wire.initialize()["result"]["slash_commands"]
    assert [c["name"] for c in early] == [
        "init",
        "compact",
        "clear",
        "yolo",
        "plan",
        "budget",
        "model",
        "skill:skill-creator",
        "skill:soulwire-help",
    ]  # fmt: skip (the built-in skills follow the commands, as the reference's do)
    assert early[2]["aliases"] == ["reset"]
    late = wire.initialize(external_tools=[])["result"]["slash_commands"]
    assert late == early
    tools = [{"name": "t", "description": "d", "parameters": {"type": "object"}}]
    wire.close()
    wire = engine("text: x")
    assert wire.initialize(external_tools=tools)["result"]["slash_commands"] == early  # full server path


def test_auto_compaction_at_step_start_and_the_turn_continues(engine, sandbox):
    sandbox.config_extra = COMPACTING
    wire = engine(
        "usage: input_other=60000 output=10\ntext: answer one",
        "text: the summary",
        "usage: input_other=500 output=5\ntext: answer two",
        args=("--session", "auto"),
    )
    wire.prompt("q1")
    events, response = wire.prompt("q2")
    assert response["result"]["status"] == "finished"
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "CompactionBegin",
        "CompactionEnd",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "answer two"}]
    assert payloads(events, "StatusUpdate")[0]["context_tokens"] == 500

    archived = records(context_file(sandbox, "auto", "context_1.jsonl"))
    assert [r.get("content") for r in archived if r["role"] == "user"] == ["q1", "q2"]
    fresh = records(context_file(sandbox, "auto"))
    assert [r["role"] for r in fresh[:3]] == ["_system_prompt", "_checkpoint", "user"]
    assert fresh[1] == {"role": "_checkpoint", "id": 0}
    assert fresh[2]["content"] == [
        {"type": "text", "text": SUMMARY_HEADER},
        {"type": "text", "text": "the summary"},
    ]
    kept = [(r["role"], r["content"]) for r in fresh if not r["role"].startswith("_")][1:]
    assert kept == [("assistant", "answer one"), ("user", "q2"), ("assistant", "answer two")]
    assert fresh[3 + 2]["role"] == "_usage"  # the estimate written by the compaction

    # the compacted context is what a resumed process sees
    wire.close()
    wire = engine("text: three", args=("--session", "auto"))
    wire.prompt("q3")
    wire.close()
    roles = [r["role"] for r in records(context_file(sandbox, "auto")) if not r["role"].startswith("_")]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]


def test_context_overflow_compacts_once_and_retries_the_step(engine, sandbox):
    wire = engine(
        "text: answer one",
        "text: answer two",
        "error: 400 This model's maximum context length is 8192 tokens",
        "text: the summary",
        "text: answer three",
        "error: 400 prompt is too long",
    )
    wire.prompt("q1")
    wire.prompt("q2")
    events, response = wire.prompt("q3")
    assert response["result"]["status"] == "finished"
    assert event_types(events) == ["TurnBegin", "StepBegin", "CompactionBegin", "CompactionEnd", "ContentPart",
                                   "StatusUpdate", "TurnEnd"]  # fmt: skip
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "answer three"}]
    # Only the last exchange is left: nothing older to summarise, so the error stands.
    wire.prompt("/clear")
    events, response = wire.prompt("q4")
    assert response["error"]["code"] == -32003
    assert "prompt is too long" in response["error"]["message"]
    assert "CompactionBegin" not in event_types(events)


def test_failed_compaction_leaves_the_context_intact(engine, sandbox):
    sandbox.config_extra = COMPACTING
    wire = engine(
        "usage: input_other=60000 output=10\ntext: answer one",
        "error: 400 summary refused",
        "text: the summary",
        "text: answer two",
        args=("--session", "failing"),
    )
    wire.prompt("q1")
    before = context_file(sandbox, "failing").read_text()
    events, response = wire.prompt("q2")
    assert response["error"]["code"] == -32003 and response["error"]["message"] == "summary refused"
    assert event_types(events) == [
        "TurnBegin",
        "StepBegin",
        "CompactionBegin",
        "CompactionEnd",
        "StepInterrupted",
        "TurnEnd",
    ]
    assert not context_file(sandbox, "failing", "context_1.jsonl").exists()
    after = context_file(sandbox, "failing").read_text()
    assert after.startswith(before)  # only the new prompt's records were added
    users = [r.get("content") for r in records(context_file(sandbox, "failing")) if r["role"] == "user"]
    assert users[:2] == ["q1", "q2"] and len(users) == 3
    assert users[2].startswith("<system>Interrupted: the step failed")  # q2 was not answered
    _, response = wire.prompt("q3")  # the next try compacts and answers
    assert response["result"]["status"] == "finished"
    assert context_file(sandbox, "failing", "context_1.jsonl").exists()


def test_compact_clear_and_empty_context(engine, sandbox):
    wire = engine("text: a1", "text: a2", "text: compacted summary", args=("--session", "manual"))
    events, _ = wire.prompt("/compact")
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "The context is empty."}]
    assert event_types(events) == ["TurnBegin", "ContentPart", "TurnEnd"]
    wire.prompt("q1")
    wire.prompt("q2")
    events, response = wire.prompt("/compact keep the numbers")
    assert response["result"]["status"] == "finished"
    assert event_types(events) == [
        "TurnBegin",
        "CompactionBegin",
        "CompactionEnd",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    assert payloads(events, "ContentPart")[0]["text"] == "The context has been compacted."
    status = payloads(events, "StatusUpdate")[0]
    assert status["max_context_tokens"] == 100000 and status["token_usage"] is None
    assert status["context_tokens"] == status["context_usage"] * 100000
    fresh = records(context_file(sandbox, "manual"))
    assert fresh[2]["content"][1] == {"type": "text", "text": "compacted summary"}

    events, _ = wire.prompt("/reset")
    assert payloads(events, "ContentPart")[0]["text"] == "The context has been cleared."
    assert payloads(events, "StatusUpdate")[0]["context_tokens"] == 0
    assert [r["role"] for r in records(context_file(sandbox, "manual"))] == ["_system_prompt"]
    assert context_file(sandbox, "manual", "context_2.jsonl").exists()


def test_yolo_is_remembered_by_the_session(engine, sandbox):
    wire = engine("text: x", args=("--session", "y"))
    events, _ = wire.prompt("/yolo")
    on_text = payloads(events, "ContentPart")[0]["text"]
    wire.close()
    state = json.loads(context_file(sandbox, "y", "state.json").read_text())
    assert state["approval"]["yolo"] is True
    assert state["version"] == 1 and state["custom_title"] is None  # slash commands do not title

    wire = engine("text: x", args=("--session", "y"))
    events, _ = wire.prompt("/yolo")  # restored as on, so this turns it off
    assert payloads(events, "ContentPart")[0]["text"] != on_text
    wire.close()
    assert json.loads(context_file(sandbox, "y", "state.json").read_text())["approval"]["yolo"] is False


def test_yolo_flag_alone_is_not_persisted(engine, sandbox):
    wire = engine("text: x", args=("--session", "flag", "--yolo"))
    wire.prompt("hi")
    wire.close()
    assert json.loads(context_file(sandbox, "flag", "state.json").read_text())["approval"]["yolo"] is False


def test_init_writes_agents_md_without_nested_turns(engine, sandbox):
    wire = engine(
        "text: # Agents guide\ntext:  - run `make test`", "text: thanks", args=("--session", "init")
    )
    events, response = wire.prompt("/init")
    assert response["result"]["status"] == "finished"
    assert event_types(events).count("TurnBegin") == 1 and event_types(events).count("TurnEnd") == 1
    assert event_types(events)[:2] == ["TurnBegin", "StepBegin"]
    agents = sandbox.work / "AGENTS.md"
    assert agents.read_text() == "# Agents guide - run `make test`\n"
    assert payloads(events, "ContentPart")[-1]["text"] == f"Wrote {agents} (1 lines)."
    history = [r for r in records(context_file(sandbox, "init")) if not r["role"].startswith("_")]
    assert len(history) == 1 and "# Agents guide" in history[0]["content"]  # the scratch run is not kept
    _, response = wire.prompt("what now?")
    assert response["result"]["status"] == "finished"


def test_sigkill_during_compaction_keeps_the_old_context(engine, sandbox):
    sandbox.config_extra = COMPACTING
    wire = engine(
        "usage: input_other=60000 output=10\ntext: answer one",
        "error: 503 busy",  # the compaction call is retried after a back-off: the kill lands there
        "text: never used",
        args=("--session", "crash"),
    )
    wire.prompt("q1")
    wire.request("prompt", {"user_input": "q2"})
    while True:
        message = wire.recv()
        assert message is not None
        if (message.get("params") or {}).get("type") == "CompactionBegin":
            break
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)
    assert not context_file(sandbox, "crash", "context_1.jsonl").exists()
    users = [r.get("content") for r in records(context_file(sandbox, "crash")) if r["role"] == "user"]
    assert users == ["q1", "q2"]

    wire = engine("text: summary", "text: answer three", args=("--session", "crash"))
    events, response = wire.prompt("q3")
    assert response["result"]["status"] == "finished"
    assert "CompactionEnd" in event_types(events)
    summary = records(context_file(sandbox, "crash"))[2]["content"][1]["text"]
    assert summary == "summary"
