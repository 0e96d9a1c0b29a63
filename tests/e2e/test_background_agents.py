"""Background sub-agents (`Agent` with `run_in_background`) through the session's background
tasks, in the real engine against a fake Chat Completions server on 127.0.0.1 that answers the
parent and the sub-agent by who is asking (their calls interleave, so a queue would race): the
immediate answer, TaskOutput waiting for the result, the end notice at the parent's next step,
the sub-agent's files, and TaskStop ending a sub-agent that is still at work."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.tool_calls import results, run_turn
from tests.wire_client import WireProcess, engine_env, payloads

SUB_ANSWER = ("The sub-agent looked at the work dir and found exactly what was asked. " * 4).strip()

Reply = dict[str, Any]  # {"text": str} or {"call": (id, name, arguments)}


def chunks(reply: Reply) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return f"data: {json.dumps(body)}\n\n"

    if "call" in reply:
        call_id, name, arguments = reply["call"]
        function = {"name": name, "arguments": json.dumps(arguments)}
        delta = {
            "role": "assistant",
            "tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": function}],
        }
        text = chunk(delta) + chunk({}, "tool_calls")
    else:
        text = chunk({"role": "assistant", "content": reply["text"]}) + chunk({}, "stop")
    return (text + "data: [DONE]\n\n").encode()


@contextmanager
def fake_llm(answer: Callable[[dict[str, Any], bool], Reply]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
            data = chunks(answer(body, "sub-agent" in str(system)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()


def start_engine(
    root: Path, base_url: str, more_models: dict[str, str] | None = None, **more_config: Any
) -> WireProcess:
    """The engine on the fake server; `more_models`: alias → model name, besides `m`;
    `more_config`: more top-level configuration sections."""
    (root / "work").mkdir(parents=True, exist_ok=True)
    models = {"m": "test-model", **(more_models or {})}
    config = {
        "default_model": "m",
        "models": {
            alias: {"provider": "p", "model": name, "max_context_size": 100_000}
            for alias, name in models.items()
        },
        "providers": {"p": {"type": "openai_legacy", "base_url": base_url, "api_key": "sk-test"}},
        **more_config,
    }
    (root / "config.json").write_text(json.dumps(config))
    argv = [sys.executable, "-m", "soulwire", "--wire", "--config-file", str(root / "config.json")]
    wire = WireProcess(
        [*argv, "--work-dir", str(root / "work"), "--yolo", "--session", "s-1"],
        engine_env(root),
        root / "work",
    )
    wire.initialize(protocol_version="1.10")
    return wire


def one_finished_turn(
    root: Path,
    answer: Callable[[dict[str, Any], bool], Reply],
    more_models: dict[str, str] | None = None,
    **more_config: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One prompt on an engine answered by `answer`, finished: (its messages, the bodies the
    fake server received)."""
    with fake_llm(answer) as (url, bodies):
        wire = start_engine(root, url, more_models, **more_config)
        try:
            messages, result = run_turn(wire)
        finally:
            wire.close()
    assert result == {"status": "finished"}
    return messages, bodies


def parent_steps(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def task_id_in(body: dict[str, Any]) -> str:
    tool_texts = [json.dumps(m["content"]) for m in body["messages"] if m["role"] == "tool"]
    match = re.search(r"task_id: (agent-[a-z0-9]+)", tool_texts[0])
    assert match, tool_texts
    return match.group(1)


def agent_call(**extra: Any) -> Reply:
    arguments = {
        "description": "survey the tree",
        "prompt": "Look around and report.",
        "run_in_background": True,
    }
    return {"call": ("a1", "Agent", {**arguments, **extra})}


def test_a_background_subagent_reports_through_task_output_and_a_notice(tmp_path: Path):
    def answer(body: dict[str, Any], sub: bool) -> Reply:
        if sub:
            return {"text": SUB_ANSWER}
        step = parent_steps(body)
        if step == 0:
            return agent_call()
        if step == 1:
            return {"call": ("o1", "TaskOutput", {"task_id": task_id_in(body), "block": True, "timeout": 60})}
        return {"text": "parent done"}

    messages, bodies = one_finished_turn(tmp_path, answer)
    found = results(messages)
    started = found["a1"]
    assert not started["is_error"] and started["message"] == "Background task started."
    lines = started["output"].splitlines()
    task_id = lines[0].removeprefix("task_id: ")
    agent_id = lines[4].removeprefix("agent_id: ")
    assert re.fullmatch(r"agent-[a-z0-9]{8}", task_id) and re.fullmatch(r"a[0-9a-f]{8}", agent_id)
    assert lines[1:4] == ["kind: agent", "status: running", "description: survey the tree"]
    assert lines[5:7] == ["actual_subagent_type: coder", "automatic_notification: true"]
    assert (
        lines[-1]
        == f'resume_hint: Use Agent(resume="{agent_id}", prompt="...") to continue this instance later.'
    )
    assert not payloads(messages, "SubagentEvent")  # nothing of it travels inside the parent's turn

    snapshot = found["o1"]["output"]
    assert "retrieval_status: success" in snapshot and "status: completed" in snapshot
    assert f"agent_id: {agent_id}" in snapshot and SUB_ANSWER in snapshot

    # The end notice reached the model at the parent's next step, and the client as a Notification.
    last_parent = [b for b in bodies if "sub-agent" not in str(b["messages"][0]["content"])][-1]
    notices = [
        m["content"]
        for m in last_parent["messages"]
        if m["role"] == "user" and "<notification" in str(m["content"])
    ]
    assert len(notices) == 1 and "Task Type: agent" in notices[0] and f'source_id="{task_id}"' in notices[0]
    (notification,) = payloads(messages, "Notification")
    assert notification["type"] == "task.completed" and notification["payload"]["task_kind"] == "agent"

    session = next((tmp_path / ".soulwire" / "sessions").rglob("s-1"))
    meta = json.loads((session / "subagents" / agent_id / "meta.json").read_text())
    assert meta["status"] == "idle" and meta["subagent_type"] == "coder"
    assert (session / "tasks" / task_id / "output.log").read_text().endswith(SUB_ANSWER + "\n")


def test_task_stop_ends_a_background_subagent_at_work(tmp_path: Path):
    def answer(body: dict[str, Any], sub: bool) -> Reply:
        if sub:  # the sub-agent starts a long command and would wait for it
            return {"call": ("s1", "Shell", {"command": "sleep 60", "timeout": 120})}
        step = parent_steps(body)
        if step == 0:
            return agent_call()
        if step == 1:
            return {"call": ("x1", "TaskStop", {"task_id": task_id_in(body), "reason": "not needed"})}
        if step == 2:
            return {"call": ("o1", "TaskOutput", {"task_id": task_id_in(body), "block": True, "timeout": 60})}
        return {"text": "parent done"}

    with fake_llm(answer) as (url, _):
        wire = start_engine(tmp_path, url)
        try:
            messages, result = run_turn(wire)
        finally:
            wire.close()
    assert result == {"status": "finished"}
    found = results(messages)
    assert found["x1"]["message"] == "Task stop requested."
    snapshot = found["o1"]["output"]
    assert "status: killed" in snapshot and "reason: not needed" in snapshot


def test_a_subagent_runs_on_the_model_it_is_given_and_keeps_it_when_resumed(tmp_path: Path):
    def answer(body: dict[str, Any], sub: bool) -> Reply:
        if sub:
            return {"text": f"{SUB_ANSWER} It answered on {body['model']}."}  # long: no "go on"
        step = parent_steps(body)
        agent = {"description": "survey the tree", "prompt": "Look around and report."}
        if step == 0:
            return {"call": ("a1", "Agent", {**agent, "model": "nope"})}
        if step == 1:
            return {"call": ("a2", "Agent", {**agent, "model": "small"})}
        if step == 2:  # continue that instance, without naming the model again
            tool_texts = [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]
            match = re.search(r"agent_id: (a[0-9a-f]{8})", tool_texts[-1])
            assert match, tool_texts
            return {"call": ("a3", "Agent", {**agent, "prompt": "Once more.", "resume": match.group(1)})}
        return {"text": "parent done"}

    messages, bodies = one_finished_turn(tmp_path, answer, {"small": "small-model"})
    found = results(messages)
    assert found["a1"]["is_error"] and found["a1"]["message"] == "Unknown model alias: nope"
    assert "It answered on small-model." in found["a2"]["output"]
    assert "resumed: true" in found["a3"]["output"]
    assert "It answered on small-model." in found["a3"]["output"]
    subs = [b["model"] for b in bodies if "sub-agent" in str(b["messages"][0]["content"])]
    parents = [b["model"] for b in bodies if "sub-agent" not in str(b["messages"][0]["content"])]
    assert subs == ["small-model", "small-model"] and set(parents) == {"test-model"}
    [meta_file] = (tmp_path / ".soulwire" / "sessions").rglob("subagents/*/meta.json")
    assert json.loads(meta_file.read_text())["model"] == "small"


def test_agent_task_timeout_s_is_the_time_limit_of_a_background_subagent(tmp_path: Path):
    """`[background] agent_task_timeout_s` (a reference key; default 900 s): the time limit of a
    background sub-agent started without its own `timeout`; one with a `timeout` keeps it."""

    def answer(body: dict[str, Any], sub: bool) -> Reply:
        if sub:
            return {"text": SUB_ANSWER}
        step = parent_steps(body)
        if step == 0:
            return agent_call()
        if step == 1:
            return {"call": ("a2", "Agent", {**agent_call()["call"][2], "timeout": 300})}
        return {"text": "parent done"}

    messages, _ = one_finished_turn(tmp_path, answer, background={"agent_task_timeout_s": 120})
    found = results(messages)
    limits = {}
    for call_id in ("a1", "a2"):
        task_id = found[call_id]["output"].splitlines()[0].removeprefix("task_id: ")
        session = next((tmp_path / ".soulwire" / "sessions").rglob("s-1"))
        limits[call_id] = json.loads((session / "tasks" / task_id / "spec.json").read_text())["timeout_s"]
    assert limits == {"a1": 120, "a2": 300}
