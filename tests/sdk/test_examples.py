"""The examples run offline (scripted model) against the real engine and do what they say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_"))}
    env["HOME"] = str(tmp_path)
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_custom_ui(tmp_path: Path):
    out = run_example("custom_ui", tmp_path)
    assert "── step 1" in out and "→ current_time" in out and "← " in out
    assert "finished: 2 steps, 420 tokens in, 18 out" in out


def test_external_tools(tmp_path: Path):
    out = run_example("external_tools", tmp_path)
    assert "registered: get_weather, create_ticket, drop_database" in out
    assert "get_weather" in out and "-> ok: Oslo: 4° celsius" in out
    assert '"id": "T-1"' in out
    assert "drop_database" in out and "-> error: dropping `production` is not allowed" in out


def test_ralph_loop(tmp_path: Path):
    out = run_example("ralph_loop", tmp_path)
    assert "iteration 1:" in out and "verification FAILED" in out
    assert "iteration 2:" in out and "verification passed" in out


def test_one_shot(tmp_path: Path):
    out = run_example("one_shot", tmp_path)
    assert "async: The answer is 42." in out and "sync: The answer is 42." in out


def test_approval_policy(tmp_path: Path):
    out = run_example("approval_policy", tmp_path)
    assert "echo hello from the agent`: approve (by callback)" in out
    assert "rm -rf build`: reject (by callback): `rm -rf build` is not allowed here" in out
    assert "touch notes.txt`: reject (by timeout)" in out


def test_query(tmp_path: Path):
    out = run_example("query", tmp_path)
    assert "(thinking) I should look at the files first" in out
    assert "→ Shell {'command': 'echo README.md'}" in out and "← ok: README.md" in out
    assert "← error: " in out and "deletes files; that is not allowed" in out
    assert "assistant: There is one file, README.md" in out
    assert "result: finished after 3 steps, 3900 tokens in, 95 out, $0.002577, limit hit: None" in out


def test_structured_output(tmp_path: Path):
    out = run_example("structured_output", tmp_path)
    assert out.count("reply: ") == 2 and '"priority": "high"' in out
    assert "turns: 2, stop: finished" in out
    assert "ticket: 'Fix the flaky test', priority 1, labels ['ci']" in out


def test_hooks(tmp_path: Path):
    out = run_example("hooks", tmp_path)
    assert "blocked: reading .env is not allowed" in out
    assert "audit: Shell: {'command': 'ls 2>/dev/null'}" in out  # the amended input ran
    assert "assistant: Tests written as well." in out and "result: finished" in out


def test_in_process_tools(tmp_path: Path):
    out = run_example("in_process_tools", tmp_path)
    assert "tools the engine accepted: convert, word_count" in out
    assert "'enum': ['celsius', 'fahrenheit']" in out
    assert "<- 37.8 celsius" in out and "<- 3" in out


def test_sessions(tmp_path: Path):
    out = run_example("sessions", tmp_path)
    assert "2 turns" in out and "turn 2: 'And if I need them in order?'" in out
    assert "forked after turn 1: 'the other way', 1 turn" in out
    assert (
        "branch history: ['How do I map names to ages?', 'What if I only need the names?', 'Thanks!']" in out
    )
    assert "original history: ['How do I map names to ages?', 'And if I need them in order?']" in out
    assert "after deleting the fork: ['How do I map names to ages?']" in out


def test_controls(tmp_path: Path):
    out = run_example("controls", tmp_path)
    assert "engine: Soulwire" in out and "Wire 1.10" in out
    assert "kept the change small" in out  # the steer reached the model's context
    assert "plan mode: True -> False" in out
    assert "after set_model: 'Hello from the echo model.' (same engine: True)" in out
    assert "interrupted turn: cancelled" in out


def test_migration_examples(tmp_path: Path):
    claude = run_example("migrate_from_claude", tmp_path)
    assert "tool: count_todos {'path': 'app.py'}" in claude
    assert claude.count("done: finished") == 2 and "assistant: Start with the TODO in the parser." in claude
    kimi = run_example("migrate_from_kimi", tmp_path)
    assert "print('hello, world')" in kimi and "[approving: Run command `ls`]" in kimi
    assert "The directory is empty." in kimi
