"""Other ACP agents as sub-agents: the real `soulwire --wire` delegates an Agent call to an
agent of `[acp_agents]` — the real `soulwire acp` with its own scripted model — whose updates
arrive as SubagentEvents and whose permission request reaches the Wire client as an approval;
and bad agents (missing command, crash mid-turn, garbage, silence) end as one error of the
Agent call with nothing left running, and the parent turn goes on."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tool_calls import answering, approve, call, requests, results
from tests.wire_client import Sandbox, WireProcess, payloads, scripted_config

BAD_AGENT = str(Path(__file__).resolve().parent / "agents" / "bad_agent.py")


def delegate_call(call_id: str, agent: str, prompt: str) -> str:
    return call(call_id, "Agent", {"description": "delegate", "prompt": prompt, "subagent_type": agent})


def child_agent(sandbox: Sandbox, *scripts: str) -> list[str]:
    """`soulwire acp` as a third-party agent: its own config and scripted model."""
    scripts_path = sandbox.root / "child-scripts.json"
    scripts_path.write_text(json.dumps(list(scripts)))
    config = sandbox.root / "child-config.json"
    config.write_text(json.dumps(scripted_config(scripts_path)))
    return [sys.executable, "-m", "soulwire", "acp", "--config-file", str(config)]


def start(engine: Any, sandbox: Sandbox, agents: dict[str, Any], *scripts: str) -> WireProcess:
    sandbox.config_extra = {"acp_agents": agents}
    wire = engine(*scripts)
    wire.initialize(protocol_version="1.10")
    return wire


TURN_S = 90.0  # a delegated `soulwire acp` starts its own engine: seconds on a busy machine


def run_turn(wire: WireProcess, text: str = "go", answer: Any = approve) -> tuple[list[dict[str, Any]], Any]:
    messages, response = wire.until_response(
        wire.request("prompt", {"user_input": text}), answer=answer, timeout=TURN_S
    )
    assert "result" in response, response
    return messages, response["result"]


def inner(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p["event"] for p in payloads(messages, "SubagentEvent")]


def test_a_soulwire_acp_sub_agent_edits_a_file_after_the_users_approval(
    engine: Any, sandbox: Sandbox
) -> None:
    child = child_agent(
        sandbox,
        call("w1", "WriteFile", {"path": "from-child.txt", "content": "delegated\n"}),
        "text: I wrote from-child.txt",
    )
    wire = start(
        engine,
        sandbox,
        {"helper": {"command": child, "description": "another agent"}},
        delegate_call("a1", "helper", "write the file"),
        "text: parent done",
    )
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"}
    [asked] = requests(messages)
    assert asked["sender"] == "helper" and asked["subagent_type"] == "helper"
    assert asked["action"] == "acp:helper:edit"
    assert (sandbox.work / "from-child.txt").read_text() == "delegated\n"
    events = inner(messages)
    kinds = [e["type"] for e in events]
    assert "ToolCall" in kinds and "ToolResult" in kinds and "ContentPart" in kinds
    text = "".join(e["payload"]["text"] for e in events if e["type"] == "ContentPart")
    assert text == "I wrote from-child.txt"
    value = results(messages)["a1"]
    assert value["is_error"] is False and "I wrote from-child.txt" in value["output"]
    wrapper = payloads(messages, "SubagentEvent")[0]
    assert wrapper["parent_tool_call_id"] == "a1" and wrapper["subagent_type"] == "helper"


def test_a_rejected_request_leaves_the_file_alone(engine: Any, sandbox: Sandbox) -> None:
    child = child_agent(
        sandbox,
        call("w1", "WriteFile", {"path": "nope.txt", "content": "x"}),
        "text: it was rejected",
    )
    wire = start(
        engine, sandbox, {"helper": {"command": child}}, delegate_call("a1", "helper", "write"), "text: ok"
    )
    messages, result = run_turn(wire, answer=answering("reject"))
    assert result == {"status": "finished"}
    assert not (sandbox.work / "nope.txt").exists()
    assert results(messages)["a1"]["is_error"] is False


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with Path(f"/proc/{pid}/stat").open(encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("missing", "cannot start"),
        ("crash", "exited with status 3 mid-turn: bad_agent: giving up"),
        ("garbage", "not JSON-RPC"),
        ("silent", "no answer to session/new within 1 s"),
        ("hang", "silent for 1 s mid-turn"),
    ],
)
def test_a_bad_agent_is_one_error_and_the_parent_goes_on(
    engine: Any, sandbox: Sandbox, mode: str, expected: str
) -> None:
    pidfile = sandbox.root / "pids"
    command = (
        ["/nonexistent/acp-agent"] if mode == "missing" else [sys.executable, BAD_AGENT, mode, str(pidfile)]
    )
    wire = start(
        engine,
        sandbox,
        {"bad": {"command": command, "start_timeout_s": 1, "idle_timeout_s": 1}},
        delegate_call("a1", "bad", "do it"),
        "text: carried on",
        "text: still here",
    )
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    value = results(messages)["a1"]
    assert value["is_error"] is True and expected in value["message"], value
    assert value["message"].count("\n") <= 1  # one line (after the agent id), no traceback
    assert "carried on" in "".join(p.get("text", "") for p in payloads(messages, "ContentPart"))
    if mode != "missing":
        child = int(pidfile.read_text().split()[0])
        deadline = time.monotonic() + 10
        while not _dead(child):  # the agent's whole process group was killed
            assert time.monotonic() < deadline, "the agent's child outlived the Agent call"
            time.sleep(0.05)
    _, again = run_turn(wire, "and again")  # the session keeps working
    assert again == {"status": "finished"}


def test_cancelling_the_parent_turn_cancels_the_delegated_one(engine: Any, sandbox: Sandbox) -> None:
    pidfile = sandbox.root / "sleeper.pid"
    child = child_agent(
        sandbox,
        call("s1", "Shell", {"command": f"echo $$ > {pidfile}; exec sleep 300"}),
        "text: never",
    )
    wire = start(
        engine, sandbox, {"helper": {"command": child}}, delegate_call("a1", "helper", "run"), "text: later"
    )
    prompt = wire.request("prompt", {"user_input": "go"})
    deadline = time.monotonic() + TURN_S
    while not (pidfile.exists() and pidfile.read_text().strip()):  # approve it, wait until it runs
        assert time.monotonic() < deadline, "the delegated command did not start"
        try:
            message = wire.recv(0.2)
        except TimeoutError:
            continue
        assert message is not None
        if message.get("method") == "request":
            wire.respond(message["id"], approve(message))
    sleeper = int(pidfile.read_text())
    wire.request("cancel")
    _, response = wire.until_response(prompt, timeout=TURN_S)
    assert response["result"]["status"] == "cancelled"
    deadline = time.monotonic() + 20
    while not _dead(sleeper):  # the delegate's command went with its cancelled turn
        assert time.monotonic() < deadline, "the delegated command outlived the cancel"
        time.sleep(0.05)


def test_an_agent_file_declares_acp_agents_too(engine: Any, sandbox: Sandbox) -> None:
    agent_file = sandbox.root / "agent.yaml"
    agent_file.write_text(
        "version: 1\nagent:\n  extend: default\n  acp_agents:\n"
        "    outside: {command: [/nonexistent/acp-agent], description: An agent elsewhere}\n"
    )
    sandbox.scripts = [delegate_call("a1", "outside", "hello"), "text: fine"]
    sandbox.write()
    wire = WireProcess(sandbox.argv("--agent-file", str(agent_file)), sandbox.env(), sandbox.work)
    try:
        wire.initialize(protocol_version="1.10")
        messages, result = run_turn(wire)
        assert result == {"status": "finished"}
        assert "cannot start '/nonexistent/acp-agent'" in results(messages)["a1"]["message"]
    finally:
        wire.close()
