"""`soulwire sessions list|show|export|delete` on sessions the real engine wrote."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.wire_client import Sandbox


def cli(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "sessions", "--work-dir", str(sandbox.work), *args],
        capture_output=True,
        text=True,
        env=sandbox.env(),
        timeout=30,
    )


def test_list_show_export_delete(engine, sandbox):
    wire = engine(
        'text: Use `pytest`\ntool_call: {"id": "c1", "name": "Missing", "arguments": "{\\"a\\": 1}"}',
        "text: done",
        args=("--session", "aaaa-first"),
    )
    wire.prompt("how do I test this project?")
    wire.close()
    wire = engine("text: second", args=("--session", "bbbb-second"))
    wire.prompt("/yolo")
    wire.prompt("another question")
    wire.close()

    listed = json.loads(cli(sandbox, "list", "--json").stdout)
    assert [s["id"] for s in listed] == ["bbbb-second", "aaaa-first"]
    assert listed[0]["is_last"] and not listed[1]["is_last"]
    assert listed[1]["title"] == "how do I test this project?" and listed[1]["turns"] == 1
    assert listed[0]["title"] == "another question" and listed[0]["turns"] == 2
    text = cli(sandbox, "list").stdout
    assert "* bbbb-second" in text and "how do I test this project?" in text

    shown = json.loads(cli(sandbox, "show", "aaaa", "--json").stdout)
    assert shown["id"] == "aaaa-first" and shown["messages"] == 4
    assert shown["wire_protocol_version"] == "1.10"
    assert json.loads(cli(sandbox, "show", "bbbb", "--json").stdout)["state"]["approval"]["yolo"] is True

    markdown = cli(sandbox, "export", "aaaa-first").stdout
    assert markdown.startswith("# how do I test this project?\n")
    assert "## User\n\nhow do I test this project?" in markdown
    assert "## Assistant\n\nUse `pytest`" in markdown
    assert "**Tool call** `Missing` (`c1`)" in markdown and '"a": 1' in markdown
    assert "## Tool result (`c1`)" in markdown and "Tool `Missing` not found" in markdown

    out = sandbox.root / "out.md"
    assert cli(sandbox, "export", "bbbb", "-o", str(out)).returncode == 0
    assert "another question" in out.read_text()

    ambiguous = cli(sandbox, "show", "")
    assert ambiguous.returncode == 1 and "matches 2 sessions" in ambiguous.stderr
    assert cli(sandbox, "delete", "nope").returncode == 1
    assert cli(sandbox, "delete", "bbbb").returncode == 0
    assert [s["id"] for s in json.loads(cli(sandbox, "list", "--json").stdout)] == ["aaaa-first"]
    index = json.loads((sandbox.share / "kimi.json").read_text())
    assert index["work_dirs"][0]["last_session_id"] is None  # the deleted session was the last one
    assert cli(sandbox, "bogus").returncode == 2
    after = subprocess.run(
        [sys.executable, "-m", "soulwire", "sessions", "list", "--json", "-w", str(sandbox.work)],
        capture_output=True,
        text=True,
        env=sandbox.env(),
        timeout=30,
    )
    assert [s["id"] for s in json.loads(after.stdout)] == ["aaaa-first"]  # -w after the command


def _context_texts(sandbox: Sandbox, session_id: str) -> list[str]:
    (path,) = sandbox.share.glob(f"sessions/*/{session_id}/context.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [str(r["content"]) for r in records if r.get("role") in ("user", "assistant")]


def test_history_and_fork_at_a_turn(engine, sandbox):
    wire = engine("text: one", "text: three", args=("--session", "src"))
    wire.prompt("first")
    wire.prompt("/yolo")  # a turn that adds nothing to the model's context
    wire.prompt("third")
    wire.close()

    lines = cli(sandbox, "history", "src").stdout.splitlines()
    begins = [json.loads(line)["payload"]["user_input"] for line in lines if '"TurnBegin"' in line]
    assert begins == ["first", "/yolo", "third"]

    for turn, kept_turns in ((2, ["first", "/yolo"]), (1, ["first"]), (0, [])):
        done = cli(sandbox, "fork", "src", "--turn", str(turn), "--json")
        assert done.returncode == 0, done.stderr
        fork = json.loads(done.stdout)
        assert fork["turns"] == turn and fork["title"] == "Fork of first"
        history = cli(sandbox, "history", fork["id"]).stdout.splitlines()
        assert [json.loads(x)["payload"]["user_input"] for x in history if '"TurnBegin"' in x] == kept_turns
        assert _context_texts(sandbox, fork["id"]) == (["first", "one"] if turn else [])
    assert _context_texts(sandbox, "src") == ["first", "one", "third", "three"]  # untouched

    whole = json.loads(cli(sandbox, "fork", "src", "--title", "copy", "--json").stdout)
    assert whole["turns"] == 3 and whole["title"] == "copy"
    too_far = cli(sandbox, "fork", "src", "--turn", "4")
    assert too_far.returncode == 1 and "has 3 turns; cannot fork after turn 4" in too_far.stderr
    assert cli(sandbox, "fork", "nope").returncode == 1
    deleted = cli(sandbox, "delete", whole["id"], "--json")
    assert json.loads(deleted.stdout) == {"deleted": whole["id"]}
