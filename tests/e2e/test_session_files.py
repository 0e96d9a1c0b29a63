"""The session files existing clients read directly keep the reference's shape (spec §3.6, §7)."""

from __future__ import annotations

import hashlib
import json
import stat

from tests.wire_client import payloads


def session_dir(sandbox, session_id: str):
    digest = hashlib.md5(str(sandbox.work).encode()).hexdigest()
    return sandbox.share / "sessions" / digest / session_id


def test_wire_and_context_records(engine, sandbox):
    wire = engine("id: m1\nusage: input_other=100 output=20\nthink: a\nthink: b\ntext: Hello\ntext:  world",
                  args=("--session", "fixed-id"))  # fmt: skip
    result = wire.initialize()["result"]
    assert result["session"]["id"] == "fixed-id"
    wire.prompt("hi")
    assert wire.close() == 0
    directory = session_dir(sandbox, "fixed-id")
    lines = (directory / "wire.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"type": "metadata", "protocol_version": "1.10"}
    records = [json.loads(line) for line in lines[1:]]
    assert all(isinstance(r["timestamp"], float) for r in records)
    assert [r["message"]["type"] for r in records] == ["TurnBegin", "StepBegin", "ContentPart", "ContentPart",
                                                       "StatusUpdate", "TurnEnd"]  # fmt: skip
    assert records[2]["message"]["payload"] == {"type": "think", "think": "ab", "encrypted": None}
    assert records[3]["message"]["payload"] == {"type": "text", "text": "Hello world"}
    assert ", " in lines[1] and '": ' in lines[1]  # the reference's separators
    context = [json.loads(line) for line in (directory / "context.jsonl").read_text().splitlines()]
    assert context[0]["role"] == "_system_prompt"
    assert context[1:] == [
        {"role": "_checkpoint", "id": 0},
        {"role": "user", "content": "hi"},
        {"role": "_checkpoint", "id": 1},
        {"role": "_usage", "token_count": 100},
        {"role": "assistant", "content": [{"type": "think", "think": "ab", "encrypted": None},
                                          {"type": "text", "text": "Hello world"}]},
        {"role": "_usage", "token_count": 120},
    ]  # fmt: skip
    assert stat.S_IMODE((directory / "wire.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    index = json.loads((sandbox.share / "kimi.json").read_text())
    assert {"path": str(sandbox.work), "kaos": "local", "last_session_id": "fixed-id"} in index["work_dirs"]


def test_empty_session_leaves_nothing_behind(engine, sandbox):
    wire = engine("text: unused", args=("--session", "empty-one"))
    wire.initialize()
    assert wire.close() == 0
    assert not session_dir(sandbox, "empty-one").exists()


def test_resume_by_id_keeps_the_history(engine, sandbox):
    wire = engine("text: first answer", "text: second answer", args=("--session", "again"))
    wire.prompt("remember this")
    wire.close()
    wire = engine("text: resumed answer", args=("--session", "again"))
    result = wire.initialize()["result"]
    assert result["session"] == {"id": "again", "resumed": True, "work_dir": str(sandbox.work)}
    events, response = wire.prompt("and now?")
    assert response["result"]["status"] == "finished"
    assert payloads(events, "ContentPart") == [{"type": "text", "text": "resumed answer"}]
    wire.close()
    context = [
        json.loads(line)
        for line in (session_dir(sandbox, "again") / "context.jsonl").read_text().splitlines()
    ]
    users = [r["content"] for r in context if r["role"] == "user"]
    assert users == ["remember this", "and now?"]
