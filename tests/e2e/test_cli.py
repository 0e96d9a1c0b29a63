"""The command line as a user meets it: exit codes, stderr/stdout discipline, print mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.wire_client import Sandbox


def soulwire(
    sandbox: Sandbox, *args: str, stdin: str = "", timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    sandbox.write()
    return subprocess.run([sys.executable, "-m", "soulwire", *args], input=stdin, capture_output=True, text=True,
                          env=sandbox.env(), cwd=sandbox.work, timeout=timeout)  # fmt: skip


def test_info_json_is_pure_json_with_compat_keys(sandbox):
    out = soulwire(sandbox, "info", "--json")
    assert out.returncode == 0 and out.stderr == ""
    data = json.loads(out.stdout)
    assert data["wire_protocol_version"] >= "1.1"
    assert tuple(int(x) for x in data["kimi_cli_version"].split(".")) >= (0, 82)
    assert {"soulwire_version", "python_version", "agent_spec_versions"} <= set(data)


def test_schema_exports_every_message(sandbox, tmp_path: Path):
    out = soulwire(sandbox, "schema", "--out", str(tmp_path / "schema"))
    assert out.returncode == 0
    names = {p.stem for p in (tmp_path / "schema" / "events").glob("*.json")}
    assert {
        "TurnBegin",
        "TurnEnd",
        "StepBegin",
        "ContentPart",
        "ToolCall",
        "ToolResult",
        "StatusUpdate",
    } <= names
    approval = json.loads((tmp_path / "schema" / "requests" / "ApprovalRequest.json").read_text())
    assert {"id", "tool_call_id", "sender", "action", "description"} <= set(approval["required"])


@pytest.mark.parametrize(
    "args",
    [
        ["--wire", "--print"],
        ["--wire", "--max-steps-per-turn", "0"],
        ["--wire", "--config", "not = [valid"],
        ["--wire", "--config-file", "/nonexistent/config.toml"],
        ["--continue", "--session", "abc", "--wire"],
        ["--wire", "--output-format", "text"],
        ["--wire", "--work-dir", "/nonexistent/dir"],
        ["--bogus-flag"],
    ],
)
def test_usage_errors_exit_2_with_message_on_stderr(sandbox, args):
    out = soulwire(sandbox, *args)
    assert out.returncode == 2
    assert out.stdout == ""
    assert "soulwire" in out.stderr


def test_continue_without_previous_session_is_a_usage_error(sandbox):
    out = soulwire(sandbox, "--wire", "--continue", "--config-file", str(sandbox.config_path))
    assert out.returncode == 2
    assert "No previous session" in out.stderr


def test_invalid_config_content_is_reported(sandbox):
    sandbox.write()
    bad = sandbox.root / "bad.json"
    bad.write_text(json.dumps({"default_model": "missing", "models": {}}))
    out = soulwire(sandbox, "--wire", "--config-file", str(bad), stdin="")
    assert out.returncode == 2
    assert "default_model" in out.stderr


def test_all_reference_flags_parse(sandbox):
    sandbox.scripts = ["text: ok"]
    out = soulwire(sandbox, "--wire", "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work),
                   "--model", "scripted", "--no-thinking", "--auto-approve", "--skills-dir", str(sandbox.work),
                   "--mcp-config", "{}", "--max-retries-per-step", "2", "--max-ralph-iterations", "0",
                   "--agent", "default", "-y", stdin="")  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_print_mode_text_and_stream_json(sandbox):
    sandbox.scripts = ["think: hmm\ntext: Hello\ntext:  print"]
    out = soulwire(sandbox, "--print", "-p", "hi", "--config-file", str(sandbox.config_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello print"
    sandbox.scripts = ['tool_call: {"id": "t1", "name": "Nope", "arguments": "{}"}', "text: done"]
    out = soulwire(sandbox, "--print", "--output-format", "stream-json", "--config-file", str(sandbox.config_path),
                   stdin="hi from stdin")  # fmt: skip
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert records[0]["role"] == "assistant" and records[0]["tool_calls"][0]["id"] == "t1"
    assert records[1] == {
        "role": "tool",
        "content": "<system>ERROR: Tool `Nope` not found</system>",
        "tool_call_id": "t1",
    }
    assert records[2] == {"role": "assistant", "content": "done"}


def test_print_mode_final_message_only_and_exit_codes(sandbox):
    sandbox.scripts = ["text: first", "text: second"]
    out = soulwire(sandbox, "--quiet", "-p", "a", "--config-file", str(sandbox.config_path))
    assert out.returncode == 0 and out.stdout == "first\n"
    sandbox.scripts = ["error: 503 busy", "error: 503 busy", "error: 503 busy"]
    out = soulwire(
        sandbox,
        "--print",
        "-p",
        "a",
        "--config-file",
        str(sandbox.config_path),
        "--max-retries-per-step",
        "1",
    )
    assert out.returncode == 75
    sandbox.scripts = ["error: 400 nope"]
    out = soulwire(sandbox, "--print", "-p", "a", "--config-file", str(sandbox.config_path))
    assert out.returncode == 1 and "nope" in out.stderr


def test_demo_runs_offline(sandbox):
    out = soulwire(sandbox, "demo", timeout=60)
    assert out.returncode == 0, out.stderr
    assert "get_weather" in out.stdout and "sunny" in out.stdout and "finished" in out.stdout
