"""Sessions end to end: the real engine resumes what an earlier process wrote — after a clean
exit, after stdin closed mid-turn and after SIGKILL — and replays it."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

from tests.wire_client import Sandbox, WireProcess, event_types, payloads

from soulwire.sessions.paths import session_dir, sessions_root

EXT_TOOL = {
    "name": "ext_ok",
    "description": "open a path",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


def call(call_id: str, path: str) -> str:
    return "tool_call: " + json.dumps(
        {"id": call_id, "name": "ext_ok", "arguments": json.dumps({"path": path})}
    )


def ext_answer(message: dict[str, Any]) -> dict[str, Any]:
    payload = message["params"]["payload"]
    return {
        "tool_call_id": payload["id"],
        "return_value": {
            "is_error": False,
            "output": f"opened {payload['id']}",
            "message": "",
            "display": [],
        },
    }


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def messages(sandbox: Sandbox, session_id: str) -> list[dict[str, Any]]:
    """The model-visible messages of context.jsonl (special `_` records left out)."""
    path = session_dir(sandbox.share, sandbox.work, session_id) / "context.jsonl"
    return [r for r in records(path) if not r["role"].startswith("_")]


def wire_types(sandbox: Sandbox, session_id: str) -> list[str]:
    path = session_dir(sandbox.share, sandbox.work, session_id) / "wire.jsonl"
    return [r["message"]["type"] for r in records(path) if "message" in r]


def wait_for(wire: WireProcess, predicate: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        message = wire.recv()
        assert message is not None, "".join(wire.stderr_lines)
        seen.append(message)
        if predicate(message):
            return seen


def kill(wire: WireProcess) -> None:
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=10)


def test_resume_by_id_and_by_continue_after_a_clean_exit(engine, sandbox):
    wire = engine("text: first answer", args=("--session", "s-1"))
    assert wire.initialize()["result"]["session"] == {
        "id": "s-1",
        "resumed": False,
        "work_dir": str(sandbox.work),
    }
    _, response = wire.prompt("remember the word kiwi")
    assert response["result"]["status"] == "finished"
    assert wire.close() == 0

    wire = engine("text: second answer", args=("--session", "s-1"))
    assert wire.initialize()["result"]["session"]["resumed"] is True
    wire.prompt("what was the word?")
    assert wire.close() == 0
    texts = [(m["role"], m["content"]) for m in messages(sandbox, "s-1")]
    assert texts == [
        ("user", "remember the word kiwi"),
        ("assistant", "first answer"),
        ("user", "what was the word?"),
        ("assistant", "second answer"),
    ]

    wire = engine("text: third", args=("--continue",))
    result = wire.initialize()["result"]
    assert result["session"]["id"] == "s-1" and result["session"]["resumed"] is True
    events, response = wire.until_response(wire.request("replay"))
    assert response["result"] == {"status": "finished", "events": 10, "requests": 0}
    assert event_types(events).count("TurnBegin") == 2
    state = json.loads((session_dir(sandbox.share, sandbox.work, "s-1") / "state.json").read_text())
    assert state["custom_title"] == "remember the word kiwi"


def test_unknown_id_creates_that_session_and_empty_sessions_leave_no_trace(engine, sandbox):
    wire = engine("text: x", args=("--session", "brand-new"))
    assert wire.initialize()["result"]["session"] == {
        "id": "brand-new",
        "resumed": False,
        "work_dir": str(sandbox.work),
    }
    assert wire.close() == 0
    assert not session_dir(sandbox.share, sandbox.work, "brand-new").exists()

    wire = engine("text: x")
    wire.initialize()
    assert wire.close() == 0
    root = sessions_root(sandbox.share, sandbox.work)
    assert not root.exists() or not list(root.iterdir())


def test_continue_without_history_and_bad_ids_are_usage_errors(engine):
    wire = engine("text: x", args=("--continue",))
    assert wire.proc.wait(timeout=15) == 2
    assert "No previous session" in "".join(wire.stderr_lines)
    wire = engine("text: x", args=("--session", "../escape"))
    assert wire.proc.wait(timeout=15) == 2


def test_stdin_eof_mid_turn_keeps_completed_steps(engine, sandbox):
    wire = engine(call("e1", "a"), call("e2", "b"), "text: never", args=("--session", "eof"))
    wire.initialize(external_tools=[EXT_TOOL])
    wire.request("prompt", {"user_input": "open two files"})
    pending = 0

    def second_request(message: dict[str, Any]) -> bool:
        nonlocal pending
        if message.get("method") != "request":
            return False
        pending += 1
        if pending == 1:
            wire.respond(message["id"], ext_answer(message))
            return False
        return True

    wait_for(wire, second_request)
    assert wire.close() == 0  # stdin EOF while the second tool call waits for the client

    history = messages(sandbox, "eof")
    # The step cut short keeps its call, with a result saying so, and a note closes the request.
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    assert history[1]["tool_calls"][0]["id"] == "e1" and history[3]["tool_calls"][0]["id"] == "e2"
    assert history[4]["content"] == (
        "<system>ERROR: interrupted: the turn was cancelled before this call finished</system>"
    )
    assert history[5]["content"].startswith("<system>Interrupted: the turn was cancelled")
    assert wire_types(sandbox, "eof")[-1] == "TurnEnd"

    wire = engine("text: resumed fine", args=("--continue",))
    assert wire.initialize()["result"]["session"] == {
        "id": "eof",
        "resumed": True,
        "work_dir": str(sandbox.work),
    }
    _, response = wire.prompt("go on")
    assert response["result"]["status"] == "finished"
    assert [m["role"] for m in messages(sandbox, "eof")][-2:] == ["user", "assistant"]


def test_sigkill_mid_turn_then_resume_by_continue(engine, sandbox):
    wire = engine(call("k1", "a"), call("k2", "b"), args=("--session", "killed"))
    wire.initialize(external_tools=[EXT_TOOL])
    wire.request("prompt", {"user_input": "work hard"})
    answered = False

    def blocked(message: dict[str, Any]) -> bool:
        nonlocal answered
        if message.get("method") == "request" and not answered:
            answered = True
            wire.respond(message["id"], ext_answer(message))
            return False
        return message.get("method") == "request"

    wait_for(wire, blocked)
    kill(wire)

    history = messages(sandbox, "killed")
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert wire_types(sandbox, "killed")[-1] != "TurnEnd"

    # --continue finds it although the killed process never exited cleanly
    wire = engine("text: back again", args=("--continue",))
    assert wire.initialize()["result"]["session"]["id"] == "killed"
    events, response = wire.until_response(wire.request("replay"))
    recorded = wire_types(sandbox, "killed")
    # the interrupted turn was closed on resume (tests/e2e/test_interrupted_turns.py has more)
    assert recorded[-4:] == ["ToolResult", "StepInterrupted", "Notification", "TurnEnd"]
    # (a client of protocol 1.3 is not sent the 1.10 Notification)
    assert response["result"]["events"] + response["result"]["requests"] == len(recorded) - 1
    assert event_types(events).count("TurnBegin") == event_types(events).count("TurnEnd") == 1
    events, response = wire.prompt("and now?")
    assert response["result"]["status"] == "finished"
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "back again"}]
    assert [m["role"] for m in messages(sandbox, "killed")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",  # k2, interrupted
        "user",  # the note that the request was interrupted
        "user",
        "assistant",
    ]


def test_sigkill_while_streaming_leaves_a_loadable_session(engine, sandbox):
    chunks = "\n".join(f"text: chunk {i} " for i in range(20000))
    wire = engine("text: done before", chunks, args=("--session", "stream"))
    wire.prompt("one")
    rid = wire.request("prompt", {"user_input": "two"})
    wait_for(wire, lambda m: (m.get("params") or {}).get("type") == "ContentPart")
    kill(wire)
    assert rid

    wire = engine("text: after the crash", args=("--session", "stream"))
    assert wire.initialize()["result"]["session"]["resumed"] is True
    _, response = wire.prompt("three")
    assert response["result"]["status"] == "finished"
    roles = [(m["role"], m["content"]) for m in messages(sandbox, "stream")]
    assert roles[:2] == [("user", "one"), ("assistant", "done before")]
    assert roles[-2:] == [("user", "three"), ("assistant", "after the crash")]
    assert ("user", "two") in roles


def test_forked_session_resumes(engine, sandbox):
    wire = engine("text: original", args=("--session", "origin"))
    wire.prompt("hello")
    wire.close()
    source = session_dir(sandbox.share, sandbox.work, "origin")
    fork = session_dir(sandbox.share, sandbox.work, "0b5e7a0c-0000-4000-8000-000000000001")
    fork.mkdir()
    for name in ("wire.jsonl", "context.jsonl"):  # what the Node SDK's forkSession copies
        (fork / name).write_bytes((source / name).read_bytes())
    wire = engine("text: forked", args=("--session", fork.name))
    assert wire.initialize()["result"]["session"]["resumed"] is True
    wire.prompt("in the fork")
    wire.close()
    assert [m["content"] for m in messages(sandbox, fork.name)] == [
        "hello",
        "original",
        "in the fork",
        "forked",
    ]
    assert [m["content"] for m in messages(sandbox, "origin")] == ["hello", "original"]


def test_files_are_private_to_the_user(engine, sandbox):
    wire = engine("text: x", args=("--session", "private"))
    wire.prompt("secret")
    wire.close()
    directory = session_dir(sandbox.share, sandbox.work, "private")
    for path in (sandbox.share, directory.parent, directory):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for name in ("context.jsonl", "wire.jsonl", "state.json"):
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE((sandbox.share / "kimi.json").stat().st_mode) == 0o600


def write_recorded_session(sandbox: Sandbox, session_id: str, turns: int) -> int:
    """A wire.jsonl of `turns` recorded turns (5 records each), as an earlier process left it."""
    directory = session_dir(sandbox.share, sandbox.work, session_id)
    directory.mkdir(parents=True)
    lines = [json.dumps({"type": "metadata", "protocol_version": "1.3"})]
    for i in range(turns):
        for message in (
            {"type": "TurnBegin", "payload": {"user_input": f"q{i}"}},
            {"type": "StepBegin", "payload": {"n": 1}},
            {"type": "ContentPart", "payload": {"type": "text", "text": f"answer {i}"}},
            {
                "type": "StatusUpdate",
                "payload": {"context_usage": None, "token_usage": None, "message_id": None},
            },
            {"type": "TurnEnd", "payload": {}},
        ):
            lines.append(json.dumps({"timestamp": 1.0 + i, "message": message}))
    (directory / "wire.jsonl").write_text("\n".join(lines) + "\n")
    (directory / "context.jsonl").write_text(json.dumps({"role": "user", "content": "q"}) + "\n")
    return turns * 5


def test_cancel_stops_a_long_replay_and_the_session_keeps_serving(engine, sandbox):
    total = write_recorded_session(sandbox, "big", 6000)
    wire = engine("text: still here", args=("--session", "big"))
    wire.initialize()
    rid = wire.request("replay")
    wait_for(wire, lambda m: (m.get("params") or {}).get("type") == "TurnBegin")
    cid = wire.request("cancel")
    seen, response = wire.until_response(rid, timeout=60)
    result = response["result"]
    assert result["status"] == "cancelled" and 0 < result["events"] < total
    assert any(m.get("id") == cid and m.get("result") == {} for m in seen)
    assert len([m for m in seen if m.get("method") == "event"]) + 1 == result["events"]
    _, response = wire.until_response(wire.request("replay"), timeout=60)
    assert response["result"] == {"status": "finished", "events": total, "requests": 0}
    _, response = wire.prompt("after replays")
    assert response["result"]["status"] == "finished"


def test_replay_sends_recorded_requests_and_respects_the_client_version(engine, sandbox):
    wire = engine("error: 503 busy", call("r1", "a"), "text: done", args=("--session", "rq"))
    wire.initialize(protocol_version="1.10", external_tools=[EXT_TOOL])
    live, _ = wire.prompt("go", answer=ext_answer)
    assert "StepRetry" in event_types(live)
    replayed, response = wire.until_response(wire.request("replay"))
    assert response["result"]["requests"] == 1
    assert event_types(replayed) == [t for t in event_types(live) if t != "ApprovalResponse"]
    request = next(m for m in replayed if m.get("method") == "request")
    assert request["id"] == request["params"]["payload"]["id"] == "r1"
    assert response["result"]["events"] + 1 == len(wire_types(sandbox, "rq"))
    wire.close()

    wire = engine("text: x", args=("--session", "rq"))
    wire.initialize(protocol_version="1.3")
    replayed, response = wire.until_response(wire.request("replay"))
    assert "StepRetry" not in event_types(replayed)  # a 1.3 client does not know it
    assert response["result"]["events"] + 1 == len(wire_types(sandbox, "rq")) - 1


def test_a_second_engine_on_a_held_session_says_who_holds_it_in_initialize(engine, sandbox):
    """Not a -32603 for every prompt: `initialize` already answers -32000 with the reason
    `session_held` and the holder (pid, host, since), every request after it the same, and
    the engine exits 2 when the client hangs up."""
    import socket
    import time

    first = engine("text: one", args=("--session", "held"))
    assert first.initialize()["result"]["session"]["id"] == "held"
    second = WireProcess(sandbox.argv("--session", "held"), sandbox.env(), sandbox.work)
    answer = second.initialize()
    error = answer["error"]
    assert error["code"] == -32000
    data = error["data"]
    assert data["reason"] == "session_held" and data["session_id"] == "held"
    holder = data["holder"]
    assert holder["pid"] == first.proc.pid and holder["host"] == socket.gethostname()
    assert time.time() - 600 < holder["since"] <= time.time()
    assert error["message"].startswith(f"session held is in use by another process (pid {first.proc.pid} on ")
    _, prompt = second.prompt("two")
    assert prompt["error"] == error
    assert second.close() == 2
    [line] = second.stderr_lines
    assert (
        line.startswith("soulwire: error: session held is in use by another process")
        and "Traceback" not in line
    )
    _, done = first.prompt("still mine")
    assert done["result"]["status"] == "finished"
