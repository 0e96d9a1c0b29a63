"""A tiny scripted Wire *protocol peer* for SDK tests (stdlib only): it plays situations the
real engine cannot produce on demand — approval requests without built-in tools, event types
from the future, crashes, an engine that ignores stdin EOF. It is not an engine.

Usage: python fake_engine.py SCENARIO [--pidfile PATH]"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCENARIO = sys.argv[1] if len(sys.argv) > 1 else "approvals"
ARGS = sys.argv[2:]


def arg(name: str) -> str | None:
    return ARGS[ARGS.index(name) + 1] if name in ARGS else None


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def event(type_: str, payload: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "event", "params": {"type": type_, "payload": payload}})


def request(id_: str, type_: str, payload: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "request", "id": id_, "params": {"type": type_, "payload": payload}})


def text(t: str) -> None:
    event("ContentPart", {"type": "text", "text": t})


def read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    return json.loads(line)


PENDING: list[dict[str, Any]] = []


def wait_answer(id_: str) -> dict[str, Any] | None:
    """The client's answer to our request `id_`; other messages are queued."""
    while True:
        message = read()
        if message is None:
            return None
        if message.get("id") == id_ and "method" not in message:
            return message
        PENDING.append(message)


def approval(id_: str, command: str, action: str = "run command") -> dict[str, Any]:
    return {
        "id": id_,
        "tool_call_id": "tc-" + id_,
        "sender": "Shell",
        "action": action,
        "description": f"Run command `{command}`",
        "display": [{"type": "shell", "language": "bash", "command": command}],
        "future_field": {"kept": True},
    }


def answer_text(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "closed"
    if "error" in answer:
        return "error:" + str(answer["error"].get("message"))
    result = answer.get("result") or {}
    return f"{result.get('response')}:{result.get('feedback', '')}"


def turn_approvals(count: int) -> None:
    event("StepBegin", {"n": 1})
    for i in range(1, count + 1):
        rid = f"a{i}"
        event(
            "ToolCall",
            {"type": "function", "id": "tc-" + rid, "function": {"name": "Shell", "arguments": "{}"}},
        )
        request(rid, "ApprovalRequest", approval(rid, f"echo {i}"))
        answer = wait_answer(rid)
        result = (answer or {}).get("result") or {}
        response = result.get("response", "reject")
        event(
            "ApprovalResponse",
            {"request_id": rid, "response": response, "feedback": result.get("feedback", "")},
        )
        text(answer_text(answer) + ";")


def turn_for_session() -> None:
    """Two pending approvals with the same action; approving the first for the session
    resolves the second on the engine side (as the reference does)."""
    event("StepBegin", {"n": 1})
    request("s1", "ApprovalRequest", approval("s1", "echo one"))
    request("s2", "ApprovalRequest", approval("s2", "echo two"))
    answer = wait_answer("s1")
    result = (answer or {}).get("result") or {}
    event("ApprovalResponse", {"request_id": "s1", "response": result.get("response"), "feedback": ""})
    if result.get("response") == "approve_for_session":
        event("ApprovalResponse", {"request_id": "s2", "response": "approve_for_session", "feedback": ""})
        text("s2 auto-approved;")
    else:
        text(answer_text(wait_answer("s2")) + ";")


def turn_question() -> None:
    event("StepBegin", {"n": 1})
    question = {"question": "Which colour?", "options": [{"label": "red"}, {"label": "blue"}]}
    request("q1", "QuestionRequest", {"id": "q1", "tool_call_id": "tc-q1", "questions": [question]})
    answer = wait_answer("q1")
    text(json.dumps(((answer or {}).get("result") or {}).get("answers")))


def turn_future() -> None:
    event("StepBegin", {"n": 1})
    event("HologramBegin", {"depth": 3})
    text("known")
    event("ContentPart", {"type": "hologram", "beam": 1})
    event("StatusUpdate", {"token_usage": {"input_other": 1, "output": 2}, "quantum_usage": 0.5})
    event(
        "ToolResult",
        {
            "tool_call_id": "x",
            "return_value": {
                "is_error": False,
                "output": "o",
                "message": "",
                "display": [{"type": "sparkles", "level": 9}],
            },
        },
    )
    event("StepBegin", {"n": "not a number"})
    sys.stdout.write("this line is not JSON\n")
    sys.stdout.flush()
    send({"jsonrpc": "2.0", "method": "event", "params": "odd"})
    request("m1", "MysteryRequest", {"id": "m1"})
    answer = wait_answer("m1")
    code = (answer or {}).get("error", {}).get("code")
    text(f"mystery answered with {code}")


def handle(message: dict[str, Any], state: dict[str, Any]) -> None:
    method, rid = message.get("method"), message.get("id")
    if "method" not in message:
        return  # a late answer
    if method == "initialize":
        if SCENARIO == "no_initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32601, "message": "Unexpected method received: initialize"},
                }
            )
            return
        if SCENARIO == "silent":
            return
        state["hello"] = message.get("params")
        result = {
            "protocol_version": "1.10",
            "server": {"name": "Fake", "version": "0"},
            "slash_commands": [{"name": "init", "description": "d", "aliases": []}],
            "future_key": 1,
        }
        send({"jsonrpc": "2.0", "id": rid, "result": result})
        if SCENARIO == "background_approval":
            request(
                "bg1", "ApprovalRequest", {**approval("bg1", "echo bg"), "source_kind": "background_agent"}
            )
        return
    if method == "cancel":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32000, "message": "No agent turn is in progress"},
            }
        )
        return
    if method != "prompt":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32601, "message": f"Unexpected method received: {method}"},
            }
        )
        return
    user_input = (message.get("params") or {}).get("user_input")
    event("TurnBegin", {"user_input": user_input})
    if SCENARIO == "crash":
        sys.stderr.write("fatal: the fake engine crashed on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if SCENARIO == "approvals":
        turn_approvals(int(user_input) if isinstance(user_input, str) and user_input.isdigit() else 1)
    elif SCENARIO == "for_session":
        turn_for_session()
    elif SCENARIO == "future":
        turn_future()
    elif SCENARIO == "question":
        turn_question()
    elif SCENARIO == "hello":
        text(json.dumps(state.get("hello")))
    event("TurnEnd", {})
    send({"jsonrpc": "2.0", "id": rid, "result": {"status": "finished"}})


def main() -> None:
    if SCENARIO == "exit_early":
        sys.stderr.write("fake: error: the configuration is broken\n")
        sys.exit(2)
    if SCENARIO == "stubborn":
        pidfile = arg("--pidfile")
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        if pidfile:
            with Path(pidfile).open("w") as f:
                f.write(f"{os.getpid()} {child.pid}\n")
    state: dict[str, Any] = {}
    while True:
        message = PENDING.pop(0) if PENDING else read()
        if message is None:
            break
        handle(message, state)
    if SCENARIO == "stubborn":  # ignores stdin EOF: only a signal ends it
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)  # (the scenario: an engine that only a signal ends)


if __name__ == "__main__":
    main()
