"""The approvals broker over the real engine: approve, approve_for_session (exact and action
scope, pending requests), reject with and without feedback, yolo in its three forms, print
mode, cancellation, clients without `initialize`, and reads outside the workspace."""

from __future__ import annotations

import json
import subprocess

from tests.tool_calls import answering, approve, call, one_step_each, requests, results, run_turn
from tests.wire_client import event_types, payloads

REJECTED = (
    "The tool call is rejected by the user. "
    "Stop what you are doing and wait for the user to tell you how to proceed."
)


def test_approve_runs_the_command_and_echoes_the_response(engine):
    wire = engine("text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")
    wire.initialize()
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"}
    assert event_types(messages) == [
        "TurnBegin",
        "StepBegin",
        "ContentPart",
        "ToolCall",
        "StatusUpdate",
        "request:ApprovalRequest",
        "ApprovalResponse",
        "ToolResult",
        "StepBegin",
        "ContentPart",
        "StatusUpdate",
        "TurnEnd",
    ]
    request = next(m for m in messages if m.get("method") == "request")
    payload = request["params"]["payload"]
    assert request["id"] == payload["id"]
    assert {k: payload[k] for k in ("tool_call_id", "sender", "action", "description", "display")} == {
        "tool_call_id": "tc-1",
        "sender": "Shell",
        "action": "run command",
        "description": "Run command `echo ok`",
        "display": [{"type": "shell", "language": "bash", "command": "echo ok"}],
    }
    assert payload["source_kind"] == "foreground_turn" and len(payload["source_id"]) == 32
    assert payloads(messages, "ApprovalResponse") == [
        {"request_id": payload["id"], "response": "approve", "feedback": ""}
    ]
    assert results(messages)["tc-1"] == {
        "is_error": False,
        "output": "ok\n",
        "message": "Command executed successfully.",
        "display": [],
        "extras": None,
    }


def test_reject_stops_the_turn_and_leaves_the_next_script(engine, sandbox):
    marker = sandbox.work / "ran.txt"
    wire = engine(call("tc-1", "Shell", {"command": f"touch {marker}"}), "text: after")
    wire.initialize()
    messages, result = run_turn(wire, answer=answering("reject"))
    assert result == {"status": "finished"}
    assert results(messages)["tc-1"] == {
        "is_error": True,
        "output": "",
        "message": REJECTED,
        "display": [{"type": "brief", "text": "Rejected by user"}],
        "extras": None,
    }
    assert event_types(messages).count("StepBegin") == 1
    assert not marker.exists()
    messages, _ = run_turn(wire, "next")
    assert payloads(messages, "ContentPart") == [{"type": "text", "text": "after"}]


def test_reject_with_feedback_continues_the_turn(engine, sandbox):
    wire = engine(call("tc-1", "Shell", {"command": "echo hi"}), "text: after feedback")
    wire.initialize()
    messages, result = run_turn(wire, answer=answering("reject", "use python instead"))
    assert result == {"status": "finished"}
    value = results(messages)["tc-1"]
    assert value["is_error"] and value["output"] == ""
    assert value["message"] == "The tool call is rejected by the user. User feedback: use python instead"
    assert value["display"] == [{"type": "brief", "text": "Rejected: use python instead"}]
    assert payloads(messages, "ApprovalResponse")[0]["feedback"] == "use python instead"
    assert payloads(messages, "ContentPart") == [{"type": "text", "text": "after feedback"}]
    wire.close()
    [context_file] = sandbox.share.glob("sessions/*/*/context.jsonl")
    records = [json.loads(line) for line in context_file.read_text().splitlines()]
    assert {
        "role": "tool",
        "content": (
            "<system>ERROR: The tool call is rejected by the user. User feedback: use python instead</system>"
        ),
        "tool_call_id": "tc-1",
    } in records  # what the model sees (spec A.4)


def test_approve_for_session_remembers_the_exact_command_only(engine):
    wire = engine(
        *one_step_each(
            ("a", "Shell", {"command": "echo ok"}),
            ("b", "Shell", {"command": "echo ok"}),
            ("c", "Shell", {"command": "echo other"}),
        )
    )
    wire.initialize()
    messages, _ = run_turn(wire, answer=answering("approve_for_session"))
    asked = requests(messages)
    assert [r["tool_call_id"] for r in asked] == ["a", "c"]
    assert all(not v["is_error"] for v in results(messages).values())


def test_action_scope_keeps_the_reference_behaviour(engine, sandbox):
    sandbox.config_extra = {"approval_scope": "action"}
    wire = engine(
        *one_step_each(("a", "Shell", {"command": "echo ok"}), ("b", "Shell", {"command": "echo other"}))
    )
    messages, _ = run_turn(wire, answer=answering("approve_for_session"))
    assert [r["tool_call_id"] for r in requests(messages)] == ["a"]
    assert results(messages)["b"]["output"] == "other\n"


def test_approve_for_session_also_answers_waiting_requests(engine):
    step = "\n".join(
        [
            call("s1", "Shell", {"command": "echo same"}),
            call("s2", "Shell", {"command": "echo same"}),
            call("d1", "Shell", {"command": "echo different"}),
        ]
    )
    wire = engine(step, "text: done")
    wire.initialize()
    rid = wire.request("prompt", {"user_input": "go"})
    asked: dict[str, dict] = {}
    seen: list[dict] = []
    while len(asked) < 3:
        message = wire.recv()
        assert message is not None
        seen.append(message)
        if message.get("method") == "request":
            asked[message["params"]["payload"]["tool_call_id"]] = message["params"]["payload"]
    # Answer s1 for the session and d1 once; s2 is never answered by the client.
    wire.respond(asked["s1"]["id"], {"request_id": asked["s1"]["id"], "response": "approve_for_session"})
    wire.respond(asked["d1"]["id"], {"request_id": asked["d1"]["id"], "response": "approve"})
    rest, response = wire.until_response(rid)
    seen += rest
    assert response["result"] == {"status": "finished"}
    values = results(seen)
    assert [values[i]["output"] for i in ("s1", "s2", "d1")] == ["same\n", "same\n", "different\n"]
    by_request = {p["request_id"]: p["response"] for p in payloads(seen, "ApprovalResponse")}
    assert by_request == {
        asked["s1"]["id"]: "approve_for_session",
        asked["s2"]["id"]: "approve_for_session",
        asked["d1"]["id"]: "approve",
    }


def test_yolo_afk_config_and_slash_command_skip_approval(engine, sandbox):
    script = one_step_each(("y", "Shell", {"command": "echo yolo"}))
    wire = engine(*script, args=("--yolo",))
    messages, _ = run_turn(wire, answer=None)
    assert not requests(messages) and results(messages)["y"]["output"] == "yolo\n"
    wire.close()

    wire = engine(*script, args=("--afk",))
    messages, _ = run_turn(wire, answer=None)
    assert not requests(messages) and results(messages)["y"]["output"] == "yolo\n"
    wire.close()

    sandbox.config_extra = {"default_yolo": True}
    wire = engine(*script)
    messages, _ = run_turn(wire, answer=None)
    assert not requests(messages) and results(messages)["y"]["output"] == "yolo\n"
    wire.close()

    sandbox.config_extra = {}
    wire = engine(*script, *script)
    run_turn(wire, "/yolo", answer=None)
    messages, _ = run_turn(wire, answer=None)
    assert not requests(messages) and not results(messages)["y"]["is_error"]
    run_turn(wire, "/yolo", answer=None)  # off again: the next Shell call asks
    messages, _ = run_turn(wire, answer=approve)
    assert len(requests(messages)) == 1


def test_print_mode_auto_approves(sandbox):
    target = sandbox.work / "made-by-print.txt"
    sandbox.scripts = one_step_each(("p", "Shell", {"command": f"echo printed > {target}"}))
    sandbox.write()
    argv = sandbox.argv()
    argv[argv.index("--wire")] = "--print"
    done = subprocess.run(
        [*argv, "-p", "go"], env=sandbox.env(), cwd=sandbox.work, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "printed\n"


def test_cancel_resolves_a_pending_approval(engine):
    wire = engine(call("tc-1", "Shell", {"command": "echo ok"}), "text: next turn")
    wire.initialize()
    rid = wire.request("prompt", {"user_input": "go"})
    while True:
        message = wire.recv()
        assert message is not None
        if message.get("method") == "request":
            request_id = message["id"]
            break
    wire.request("cancel")
    seen, response = wire.until_response(rid)  # (nobody answers the approval: only cancel ends it)
    assert response["result"] == {"status": "cancelled"}
    assert {"request_id": request_id, "response": "reject", "feedback": ""} in payloads(
        seen, "ApprovalResponse"
    )
    # The call cut short gets its result, an error that says so, before the turn ends.
    assert event_types(seen)[-2:] == ["ToolResult", "TurnEnd"]
    (result,) = payloads(seen, "ToolResult")
    assert result["tool_call_id"] == "tc-1" and result["return_value"]["is_error"] is True
    assert (
        result["return_value"]["message"] == "interrupted: the turn was cancelled before this call finished"
    )
    wire.respond(request_id, {"request_id": request_id, "response": "approve"})  # late: ignored
    messages, result = run_turn(wire, "again")
    assert result == {"status": "finished"}
    assert payloads(messages, "ContentPart") == [{"type": "text", "text": "next turn"}]


def test_client_without_initialize_still_gets_requests(engine):
    wire = engine(*one_step_each(("tc-1", "Shell", {"command": "echo ok"})))
    messages, result = run_turn(wire, answer=approve)
    assert result == {"status": "finished"}
    assert len(requests(messages)) == 1
    assert results(messages)["tc-1"]["output"] == "ok\n"


def test_edits_ask_with_the_diff_and_remember_the_file(engine, sandbox):
    sandbox.write()
    (sandbox.work / "a.txt").write_text("one\ntwo\n")
    outside = sandbox.root / "outside.txt"
    wire = engine(
        *one_step_each(
            ("w1", "StrReplaceFile", {"path": "a.txt", "edit": {"old": "two", "new": "TWO"}}),
            ("w2", "WriteFile", {"path": "a.txt", "content": "new\n", "mode": "append"}),
            ("w3", "WriteFile", {"path": "b.txt", "content": "b\n"}),
            ("w4", "WriteFile", {"path": str(outside), "content": "out\n"}),
        )
    )
    messages, _ = run_turn(wire, answer=answering("approve_for_session"))
    asked = {r["tool_call_id"]: r for r in requests(messages)}
    assert sorted(asked) == ["w1", "w3", "w4"]  # w2 edits a.txt again: covered by the rule
    first = asked["w1"]
    assert first["sender"] == "StrReplaceFile" and first["action"] == "edit file"
    assert first["description"] == f"Edit file `{sandbox.work / 'a.txt'}`"
    assert first["display"] == [
        {
            "type": "diff",
            "path": str(sandbox.work / "a.txt"),
            "old_text": "one\ntwo",
            "new_text": "one\nTWO",
            "old_start": 1,
            "new_start": 1,
            "is_summary": False,
        }
    ]
    assert asked["w4"]["action"] == "edit file outside of working directory"
    assert (sandbox.work / "a.txt").read_text() == "one\nTWO\nnew\n"
    assert outside.read_text() == "out\n"


def test_reads_outside_the_workspace_ask_first(engine, sandbox):
    sandbox.write()
    secret_dir = sandbox.root / "elsewhere"
    secret_dir.mkdir()
    (secret_dir / "notes.txt").write_text("private notes\n")
    added = sandbox.root / "added"
    added.mkdir()
    (added / "shared.txt").write_text("shared\n")
    (sandbox.work / "link.txt").symlink_to(secret_dir / "notes.txt")
    wire = engine(
        *one_step_each(
            ("r1", "ReadFile", {"path": str(secret_dir / "notes.txt")}),
            ("r2", "ReadFile", {"path": "link.txt"}),
            ("r3", "ReadFile", {"path": str(added / "shared.txt")}),
            ("r4", "Grep", {"pattern": "private", "path": str(secret_dir)}),
        ),
        args=("--add-dir", str(added)),
    )
    messages, _ = run_turn(wire, answer=answering("reject", "stay in the project"))
    asked = {r["tool_call_id"]: r for r in requests(messages)}
    assert sorted(asked) == ["r1", "r2", "r4"]
    assert asked["r1"]["action"] == "read file outside of working directory"
    assert asked["r4"]["action"] == "search outside of working directory"
    assert str(secret_dir / "notes.txt") in asked["r2"]["description"]  # the link's target is shown
    values = results(messages)
    assert "private" not in json.dumps(values)
    assert values["r1"]["message"].endswith("User feedback: stay in the project")
    assert values["r3"]["output"] == "     1\tshared\n"


def test_invalid_answers_count_as_reject(engine):
    wire = engine(call("tc-1", "Shell", {"command": "echo ok"}), "text: after")
    wire.initialize()
    messages, _ = run_turn(wire, answer=lambda m: {"request_id": m["id"], "response": "maybe"})
    assert results(messages)["tc-1"]["message"] == REJECTED


def test_error_answer_counts_as_reject(engine):
    wire = engine(call("tc-1", "Shell", {"command": "echo ok"}), "text: after")
    rid = wire.request("prompt", {"user_input": "go"})
    while True:
        message = wire.recv()
        assert message is not None
        if message.get("method") == "request":
            wire.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -1, "message": "no"}})
            break
    seen, response = wire.until_response(rid)
    assert response["result"] == {"status": "finished"}
    assert results(seen)["tc-1"]["message"] == REJECTED


def test_replay_leaves_approvals_out(engine):
    wire = engine("text: step1\n" + call("tc-1", "Shell", {"command": "echo ok"}), "text: done")
    wire.initialize()
    live, _ = run_turn(wire, answer=approve)
    replayed, response = wire.until_response(wire.request("replay"))
    assert response["result"] == {"status": "finished", "events": 10, "requests": 0}
    assert event_types(replayed) == [t for t in event_types(live) if "Approval" not in t]


def test_a_file_changed_while_waiting_for_approval_is_not_overwritten(engine, sandbox):
    sandbox.write()
    target = sandbox.work / "a.txt"
    target.write_text("one\n")
    wire = engine(
        *one_step_each(("w", "StrReplaceFile", {"path": "a.txt", "edit": {"old": "one", "new": "two"}}))
    )

    def edit_meanwhile_then_approve(message):
        target.write_text("one\nmeanwhile\n")
        return approve(message)

    messages, _ = run_turn(wire, answer=edit_meanwhile_then_approve)
    value = results(messages)["w"]
    assert value["is_error"] and value["display"] == [{"type": "brief", "text": "File changed"}]
    assert target.read_text() == "one\nmeanwhile\n"
