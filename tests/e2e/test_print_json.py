"""`--print --output-format json` (one document: final message, usage, cost, session id, exit
reason) and `--input-format stream-json` (one turn per user message line), over the real
engine with the scripted model."""

from __future__ import annotations

import json

from tests.e2e.test_cli import soulwire
from tests.tool_calls import call


def test_json_output_is_one_document_with_message_usage_cost_session_and_reason(sandbox):
    sandbox.scripts = [
        call("t1", "Shell", {"command": "echo hi"}) + "\nusage: input_other=100 output=10",
        "text: all done\nusage: input_other=150 output=5 input_cache_read=50",
    ]
    out = soulwire(
        sandbox, "--print", "-p", "go", "--output-format", "json", "--config-file", str(sandbox.config_path)
    )
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)  # the whole of stdout is one JSON document
    assert document["type"] == "result" and document["exit_reason"] == "finished"
    assert document["exit_code"] == 0 and document["is_error"] is False and document["error"] is None
    assert document["final_message"] == "all done"
    assert document["usage"] == {
        "input_other": 250, "output": 15, "input_cache_read": 50, "input_cache_creation": 0, "total": 315,
    }  # fmt: skip
    assert document["cost_usd"] is None  # the scripted model has no price
    [session] = sandbox.share.glob("sessions/*/*")
    assert document["session_id"] == session.name and document["turns"] == 1


def test_json_output_reports_a_failure_with_its_reason_and_exit_code(sandbox):
    sandbox.scripts = ["error: 400 nope"]
    out = soulwire(
        sandbox, "--print", "-p", "go", "--output-format", "json", "--config-file", str(sandbox.config_path)
    )
    assert out.returncode == 1
    document = json.loads(out.stdout)
    assert document["exit_reason"] == "provider_error" and document["exit_code"] == 1
    assert document["is_error"] is True and "nope" in document["error"]
    sandbox.scripts = [call(f"t{i}", "Think", {"thought": "x"}) for i in range(3)]
    out = soulwire(
        sandbox,
        "--print", "-p", "go", "--output-format", "json", "--max-steps-per-turn", "1",
        "--config-file", str(sandbox.config_path),
    )  # fmt: skip
    assert json.loads(out.stdout)["exit_reason"] == "max_steps_reached" and out.returncode == 1


def test_stream_json_input_runs_one_turn_per_user_line(sandbox):
    sandbox.scripts = ["text: one", "text: two"]
    lines = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ignored"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\n"
    out = soulwire(
        sandbox, "--print", "--input-format", "stream-json", "--output-format", "stream-json",
        "--config-file", str(sandbox.config_path), stdin=stdin,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {"role": "assistant", "content": "one"},
        {"role": "assistant", "content": "two"},
    ]
    out = soulwire(
        sandbox, "--print", "--input-format", "stream-json", "--output-format", "json",
        "--config-file", str(sandbox.config_path), stdin='{"role": "user", "content": "a"}\nnot json\n',
    )  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == ["soulwire: stdin line 2 is not JSON (Expecting value)"]
    assert json.loads(out.stdout)["exit_reason"] == "usage_error"
