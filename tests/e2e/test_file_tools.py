"""ReadFile, WriteFile, StrReplaceFile, SetTodoList and Think through the real engine, on real
files in the sandbox's work dir."""

from __future__ import annotations

from tests.tool_calls import one_step_each, results, run_turn
from tests.wire_client import Sandbox, payloads


def write_files(sandbox: Sandbox, files: dict[str, str | bytes]) -> None:
    sandbox.write()
    for name, content in files.items():
        path = sandbox.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def test_read_file_windows_tails_and_caps(engine, sandbox):
    write_files(
        sandbox,
        {
            "five.txt": "a\nb\nc\nd\ne\n",
            "wide.txt": "x" * 3000 + "\nshort\n",
            "many.txt": "".join(f"line {i}\n" for i in range(1, 1501)),
            "empty.txt": "",
            "blob.bin": b"\x7fELF\x00\x01\x02",
            "sub/inner.txt": "inner\n",
        },
    )
    wire = engine(
        *one_step_each(
            ("all", "ReadFile", {"path": "five.txt"}),
            ("window", "ReadFile", {"path": "five.txt", "line_offset": 2, "n_lines": 2}),
            ("tail", "ReadFile", {"path": "five.txt", "line_offset": -2}),
            ("past", "ReadFile", {"path": "five.txt", "line_offset": 9}),
            ("wide", "ReadFile", {"path": "wide.txt"}),
            ("many", "ReadFile", {"path": "many.txt"}),
            ("empty", "ReadFile", {"path": "empty.txt"}),
            ("blob", "ReadFile", {"path": "blob.bin"}),
            ("dir", "ReadFile", {"path": "sub"}),
            ("missing", "ReadFile", {"path": "nope.txt"}),
            ("abs", "ReadFile", {"path": str(sandbox.work / "sub" / "inner.txt")}),
            ("zero", "ReadFile", {"path": "five.txt", "line_offset": 0}),
            ("deep", "ReadFile", {"path": "five.txt", "line_offset": -1001}),
        )
    )
    messages, result = run_turn(wire, answer=None)
    assert result == {"status": "finished"}
    values = results(messages)
    assert values["all"]["output"] == "     1\ta\n     2\tb\n     3\tc\n     4\td\n     5\te\n"
    assert "5" in values["all"]["message"] and "End of file" in values["all"]["message"]
    assert values["window"]["output"] == "     2\tb\n     3\tc\n"
    assert "line_offset=4" in values["window"]["message"]
    assert values["tail"]["output"] == "     4\td\n     5\te\n"
    assert values["past"]["output"] == "" and not values["past"]["is_error"]
    wide_first = values["wide"]["output"].splitlines()[0]
    assert wide_first.startswith("     1\t" + "x" * 2000) and len(wide_first) < 2100
    assert "cut" in values["wide"]["message"]
    many = values["many"]["output"].splitlines()
    assert len(many) == 1000 and many[-1] == "  1000\tline 1000"
    assert "1500" in values["many"]["message"] and "line_offset=1001" in values["many"]["message"]
    assert values["empty"] == {
        "is_error": False,
        "output": "",
        "message": "The file is empty.",
        "display": [],
        "extras": None,
    }
    for key, brief in (("blob", "Binary file"), ("dir", "Not a file"), ("missing", "File not found")):
        assert values[key]["is_error"] and values[key]["display"] == [{"type": "brief", "text": brief}]
    assert values["abs"]["output"] == "     1\tinner\n"
    assert values["zero"]["message"].startswith("Error validating JSON arguments: line_offset")
    assert values["deep"]["message"].startswith("Error validating JSON arguments: line_offset")


def test_sensitive_files_are_refused(engine, sandbox):
    write_files(
        sandbox,
        {
            ".env": "API_KEY=sk-live-123\n",
            ".env.production": "API_KEY=sk-live-456\n",
            ".env.example": "API_KEY=\n",
            ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
            ".ssh/id_ed25519.pub": "ssh-ed25519 AAAA\n",
            ".aws/credentials": "[default]\naws_secret_access_key=abc\n",
            "certs/server.key": "-----BEGIN PRIVATE KEY-----\n",
        },
    )
    (sandbox.work / "innocent.txt").symlink_to(sandbox.work / ".env")
    secret = {
        ".env",
        ".env.production",
        ".ssh/id_ed25519",
        ".aws/credentials",
        "certs/server.key",
        "innocent.txt",
    }
    readable = {".env.example", ".ssh/id_ed25519.pub"}
    names = sorted(secret | readable)
    probe = {"path": ".env", "edit": {"old": "API_KEY=sk", "new": "API_KEY=x"}}
    wire = engine(
        *one_step_each(
            *((f"r{i}", "ReadFile", {"path": n}) for i, n in enumerate(names)),
            ("probe", "StrReplaceFile", probe),
        ),
        args=("--yolo",),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["probe"]["display"] == [{"type": "brief", "text": "Sensitive file"}]
    assert (sandbox.work / ".env").read_text() == "API_KEY=sk-live-123\n"
    for index, name in enumerate(names):
        value = values[f"r{index}"]
        if name in secret:
            assert value["is_error"] and value["display"] == [{"type": "brief", "text": "Sensitive file"}], (
                name
            )
            assert value["output"] == "" and "sk-live" not in value["message"]
        else:
            assert not value["is_error"], name


def test_write_file_overwrite_append_and_errors(engine, sandbox):
    write_files(sandbox, {"f.txt": "a\nb\nc\nd\ne\n", "dir/keep.txt": "k\n"})
    wire = engine(
        *one_step_each(
            ("new", "WriteFile", {"path": "new.txt", "content": "hello\nworld\n"}),
            ("append", "WriteFile", {"path": "new.txt", "content": "more\n", "mode": "append"}),
            ("change", "WriteFile", {"path": "f.txt", "content": "a\nB\nc\nd\ne\n"}),
            ("noparent", "WriteFile", {"path": "nodir/x.txt", "content": "x"}),
            ("isdir", "WriteFile", {"path": "dir", "content": "x"}),
            ("badmode", "WriteFile", {"path": "x.txt", "content": "x", "mode": "insert"}),
            ("unicode", "WriteFile", {"path": "u.txt", "content": "héllo ✓\r\n"}),
            ("huge", "WriteFile", {"path": "huge.txt", "content": "some line of text\n" * 10_001}),
        ),
        args=("--yolo",),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["new"]["message"] == "File successfully overwritten. Current size: 12 bytes."
    assert values["new"]["display"] == [
        {
            "type": "diff",
            "path": str(sandbox.work / "new.txt"),
            "old_text": "",
            "new_text": "hello\nworld",
            "old_start": 1,
            "new_start": 1,
            "is_summary": False,
        }
    ]
    assert values["append"]["message"] == "File successfully appended to. Current size: 17 bytes."
    assert (sandbox.work / "new.txt").read_text() == "hello\nworld\nmore\n"
    assert [(b["old_text"], b["new_text"]) for b in values["change"]["display"]] == [
        ("a\nb\nc\nd\ne", "a\nB\nc\nd\ne")
    ]
    assert values["noparent"]["display"] == [{"type": "brief", "text": "Parent directory not found"}]
    assert not (sandbox.work / "nodir").exists()
    assert values["isdir"]["is_error"] and (sandbox.work / "dir" / "keep.txt").exists()
    assert values["badmode"]["message"].startswith("Error validating JSON arguments: mode")
    assert (sandbox.work / "u.txt").read_bytes() == "héllo ✓\r\n".encode()
    [summary] = values["huge"]["display"]
    assert summary["is_summary"] and (summary["old_text"], summary["new_text"]) == (
        "(0 lines)",
        "(10001 lines)",
    )


def test_str_replace_file_edits_and_clear_errors(engine, sandbox):
    original = "def f():\n    return 1\n\ndef g():\n    return 1\n"
    write_files(sandbox, {"code.py": original, "crlf.txt": "x\r\ny\r\n", "latin.txt": b"caf\xe9 = 1\n"})
    wire = engine(
        *one_step_each(
            (
                "ambiguous",
                "StrReplaceFile",
                {"path": "code.py", "edit": {"old": "return 1", "new": "return 2"}},
            ),
            ("missing", "StrReplaceFile", {"path": "code.py", "edit": {"old": "return 3", "new": "x"}}),
            (
                "partial",
                "StrReplaceFile",
                {
                    "path": "code.py",
                    "edit": [{"old": "def f", "new": "def h"}, {"old": "nowhere", "new": "x"}],
                },
            ),
            (
                "one",
                "StrReplaceFile",
                {
                    "path": "code.py",
                    "edit": {"old": "def g():\n    return 1", "new": "def g():\n    return 7"},
                },
            ),
            (
                "all",
                "StrReplaceFile",
                {"path": "code.py", "edit": {"old": "return", "new": "yield", "replace_all": True}},
            ),
            (
                "list",
                "StrReplaceFile",
                {
                    "path": "code.py",
                    "edit": [{"old": "def f", "new": "def f1"}, {"old": "def f1", "new": "def f2"}],
                },
            ),
            ("crlf", "StrReplaceFile", {"path": "crlf.txt", "edit": {"old": "x\ny", "new": "X\nY"}}),
            ("latin", "StrReplaceFile", {"path": "latin.txt", "edit": {"old": "= 1", "new": "= 2"}}),
            ("nofile", "StrReplaceFile", {"path": "nope.py", "edit": {"old": "a", "new": "b"}}),
            ("noop", "StrReplaceFile", {"path": "code.py", "edit": {"old": "def g", "new": "def g"}}),
            ("emptyold", "StrReplaceFile", {"path": "code.py", "edit": {"old": "", "new": "x"}}),
        ),
        args=("--yolo",),
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["ambiguous"]["is_error"] and "occurs 2 times" in values["ambiguous"]["message"]
    assert "replace_all" in values["ambiguous"]["message"]
    assert values["missing"]["is_error"] and "not found" in values["missing"]["message"]
    assert values["partial"]["is_error"] and values["partial"]["message"].startswith("Edit 2:")
    for key in ("one", "all", "list", "crlf", "latin"):
        assert not values[key]["is_error"], (key, values[key])
    assert "2 edit(s)" in values["list"]["message"]
    assert (
        "3 replacement(s)" not in values["all"]["message"] and "2 replacement(s)" in values["all"]["message"]
    )
    assert (sandbox.work / "code.py").read_text() == "def f2():\n    yield 1\n\ndef g():\n    yield 7\n"
    one_diff = values["one"]["display"]
    assert one_diff[0]["old_text"].endswith("return 1") and one_diff[0]["new_text"].endswith("return 7")
    assert (sandbox.work / "crlf.txt").read_bytes() == b"X\r\nY\r\n"
    assert (sandbox.work / "latin.txt").read_bytes() == b"caf\xe9 = 2\n"  # undecodable byte kept
    assert values["nofile"]["display"] == [{"type": "brief", "text": "File not found"}]
    assert values["noop"]["display"] == [{"type": "brief", "text": "No change"}]
    assert values["emptyold"]["message"].startswith("Error validating JSON arguments")


def test_todo_list_and_no_think_tool(engine):
    todos = [{"title": "write tests", "status": "done"}, {"title": "ship", "status": "in_progress"}]
    wire = engine(
        *one_step_each(
            ("empty", "SetTodoList", {}),
            ("set", "SetTodoList", {"todos": todos}),
            ("get", "SetTodoList", {}),
            ("bad", "SetTodoList", {"todos": [{"title": "x", "status": "someday"}]}),
            ("think", "Think", {"thought": "the plan looks fine"}),
        )
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["empty"]["output"] == "The todo list is empty."
    assert values["set"] == {
        "is_error": False,
        "output": "Todo list updated",
        "message": "Todo list updated",
        "display": [{"type": "todo", "items": todos}],
        "extras": None,
    }
    assert values["get"]["output"] == "Current todo list:\n- [done] write tests\n- [in_progress] ship"
    assert values["get"]["display"] == []
    assert values["bad"]["message"].startswith("Error validating JSON arguments: todos.0.status")
    # Think is not in the default agent (as in the reference): the model gets "not found".
    assert values["think"]["is_error"] and values["think"]["message"] == "Tool `Think` not found"
    calls = payloads(messages, "ToolCall")
    assert len(calls) == 5
