"""Glob and Grep (ripgrep from the wheel) through the real engine."""

from __future__ import annotations

import subprocess

from tests.tool_calls import approve, one_step_each, requests, results, run_turn
from tests.wire_client import Sandbox


def make_tree(sandbox: Sandbox) -> None:
    sandbox.write()
    files = {
        "f.txt": "alpha\nbeta\ngamma alpha\n",
        "sub/x.py": "def alpha():\n    pass\n",
        "sub/deep/y.md": "Alpha\n",
        "ignored/z.txt": "alpha\n",
        ".env": "TOKEN=alpha\n",
        ".hidden/h.txt": "alpha\n",
        ".gitignore": "ignored/\n",
    }
    for name, content in files.items():
        path = sandbox.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    subprocess.run(["git", "init", "-q", str(sandbox.work)], check=True)


def test_glob(engine, sandbox):
    make_tree(sandbox)
    for i in range(1005):
        (sandbox.work / "many").mkdir(exist_ok=True)
        (sandbox.work / "many" / f"m{i:04}.log").write_text("")
    wire = engine(
        *one_step_each(
            ("txt", "Glob", {"pattern": "*.txt"}),
            ("deep", "Glob", {"pattern": "sub/**"}),
            ("files", "Glob", {"pattern": "sub/**", "include_dirs": False}),
            ("dir", "Glob", {"pattern": "*.py", "directory": "sub"}),
            ("none", "Glob", {"pattern": "*.nothing"}),
            ("broad", "Glob", {"pattern": "**/*.py"}),
            ("escape", "Glob", {"pattern": "../*"}),
            ("many", "Glob", {"pattern": "many/*.log"}),
            ("notdir", "Glob", {"pattern": "*", "directory": "f.txt"}),
        )
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["txt"]["output"] == "f.txt"
    assert values["deep"]["output"] == "sub/\nsub/deep/\nsub/deep/y.md\nsub/x.py"
    assert values["files"]["output"] == "sub/deep/y.md\nsub/x.py"
    assert values["dir"]["output"] == "x.py"
    assert values["none"]["output"] == "" and not values["none"]["is_error"]
    assert values["broad"]["is_error"] and "sub/" in values["broad"]["output"].splitlines()
    assert values["escape"]["is_error"]
    many = values["many"]["output"].splitlines()
    assert len(many) == 1000 and "first 1000" in values["many"]["message"]
    assert values["notdir"]["is_error"]


def test_grep_modes_filters_and_paging(engine, sandbox):
    make_tree(sandbox)
    wire = engine(
        *one_step_each(
            ("files", "Grep", {"pattern": "alpha"}),
            ("content", "Grep", {"pattern": "alpha", "output_mode": "content"}),
            ("context", "Grep", {"pattern": "beta", "output_mode": "content", "-C": 1, "glob": "*.txt"}),
            ("count", "Grep", {"pattern": "alpha", "output_mode": "count_matches"}),
            ("icase", "Grep", {"pattern": "^alpha$", "-i": True, "output_mode": "content", "-n": False}),
            ("type", "Grep", {"pattern": "alpha", "type": "py"}),
            ("page", "Grep", {"pattern": "alpha", "head_limit": 1, "offset": 1}),
            (
                "multi",
                "Grep",
                {"pattern": "alpha\\(\\):\\n\\s+pass", "multiline": True, "output_mode": "content"},
            ),
            ("ignored", "Grep", {"pattern": "alpha", "include_ignored": True}),
            ("none", "Grep", {"pattern": "no such text"}),
            ("badre", "Grep", {"pattern": "(unclosed"}),
            ("secret", "Grep", {"pattern": "TOKEN", "path": ".env"}),
            ("file", "Grep", {"pattern": "beta", "path": "f.txt", "output_mode": "content"}),
            ("badmode", "Grep", {"pattern": "x", "output_mode": "lines"}),
        )
    )
    messages, _ = run_turn(wire, answer=None)
    values = results(messages)
    assert values["files"]["output"] == ".hidden/h.txt\nf.txt\nsub/x.py"
    assert ".env" in values["files"]["message"]  # skipped, and said so
    assert values["content"]["output"] == (
        ".hidden/h.txt:1:alpha\nf.txt:1:alpha\nf.txt:3:gamma alpha\nsub/x.py:1:def alpha():"
    )
    assert "TOKEN" not in values["content"]["output"]
    assert values["context"]["output"] == "f.txt-1-alpha\nf.txt:2:beta\nf.txt-3-gamma alpha"
    assert values["count"]["output"] == ".hidden/h.txt:1\nf.txt:2\nsub/x.py:1"
    assert "4 match(es) in 3 file(s)" in values["count"]["message"]
    assert values["icase"]["output"] == ".hidden/h.txt:alpha\nf.txt:alpha\nsub/deep/y.md:Alpha"
    assert values["type"]["output"] == "sub/x.py"
    assert values["page"]["output"] == "f.txt" and "offset=2" in values["page"]["message"]
    assert values["multi"]["output"] == "sub/x.py:1:def alpha():\nsub/x.py:2:    pass"
    assert "ignored/z.txt" in values["ignored"]["output"].splitlines()
    assert values["none"] == {
        "is_error": False,
        "output": "",
        "message": "No matches found.",
        "display": [],
        "extras": None,
    }
    assert values["badre"]["is_error"] and "regex" in values["badre"]["message"]
    assert values["secret"]["is_error"] and values["secret"]["display"] == [
        {"type": "brief", "text": "Sensitive file"}
    ]
    assert values["file"]["output"] == "f.txt:2:beta"
    assert values["badmode"]["message"].startswith("Error validating JSON arguments: output_mode")


def test_grep_expands_home_and_asks_outside_the_workspace(engine, sandbox):
    sandbox.write()
    (sandbox.home / "notes.txt").write_text("alpha in home\n")
    wire = engine(
        *one_step_each(
            ("home", "Grep", {"pattern": "alpha", "path": "~/notes.txt", "output_mode": "content"})
        )
    )
    messages, _ = run_turn(wire, answer=approve)
    assert [r["action"] for r in requests(messages)] == ["search outside of working directory"]
    assert results(messages)["home"]["output"].endswith("notes.txt:1:alpha in home")
