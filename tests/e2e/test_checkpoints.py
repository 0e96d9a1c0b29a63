"""Workspace checkpoints through the real engine (scripted model), on real files in a plain
directory and in a git repository: edits by WriteFile, StrReplaceFile and Shell (`sed -i`,
`rm`, `mv`, `chmod +x`, a new binary file, a symlink) are all shown and all rewound exactly;
a file edited by hand afterwards blocks the rewind; a rewind is undone; a fork with its own
work dir leaves the parent's files untouched; a client that did not negotiate sees nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.file_tree import tree
from tests.tool_calls import call, run_turn
from tests.wire_client import Sandbox, WireProcess, payloads

CHECKPOINTS = {"checkpoints": {"enabled": True}}
SHELL = (
    "sed -i s/hi/hello/ run.sh && chmod +x run.sh && mv old.txt moved.txt && rm gone.txt"
    " && printf 'b\\000\\001\\377' > blob.bin && ln -s a.txt link && echo x > noise.log"
)
TURN_ONE = [
    "\n".join(
        [
            call("w", "WriteFile", {"path": "notes.txt", "content": "hello\n"}),
            call("r", "StrReplaceFile", {"path": "a.txt", "edit": {"old": "two", "new": "TWO"}}),
        ]
    ),
    call("s", "Shell", {"command": SHELL}),
    "text: done",
]


def git(work: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=work, capture_output=True, check=True).stdout


def prepare(sandbox: Sandbox, *, repo: bool) -> None:
    sandbox.config_extra = CHECKPOINTS
    sandbox.write()
    work = sandbox.work
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (work / "run.sh").write_text("echo hi\n")
    (work / "old.txt").write_text("to move\n")
    (work / "gone.txt").write_text("to delete\n")
    (work / ".gitignore").write_text("*.log\n")
    if repo:
        git(work, "init", "-q")
        git(work, "add", "-A")
        git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")


def negotiated(wire) -> None:
    reply = wire.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
    assert reply["result"]["capabilities"]["supports_checkpoints"] is True


def call_method(wire, method: str, params: dict | None = None) -> dict:
    _, response = wire.until_response(wire.request(method, params or {}))
    return response


@pytest.mark.parametrize("repo", [False, True], ids=["plain", "git"])
def test_a_turn_is_shown_rewound_and_the_rewind_undone(engine, sandbox, repo):
    prepare(sandbox, repo=repo)
    work = sandbox.work
    before = tree(work)
    git_before = (
        [git(work, "ls-files", "-s"), git(work, "for-each-ref"), git(work, "stash", "list")] if repo else None
    )
    wire = engine(*TURN_ONE, "text: again", args=("--yolo",))
    negotiated(wire)
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    taken = payloads(messages, "CheckpointTaken")
    assert [(t["kind"], t["turn"], t["step"]) for t in taken] == [
        ("turn", 1, None),
        ("step", 1, 1),
        ("step", 1, 2),
        ("end", 1, None),
    ]
    assert [t["files_changed"] for t in taken] == [5, 0, 2, 6] and taken[0]["bytes_stored"] > 0
    after = tree(work)

    changes = call_method(wire, "changes", {"turn": 1})["result"]
    files = {f["path"]: f for f in changes["files"]}
    assert {p: f["status"] for p, f in files.items()} == {
        "notes.txt": "added",
        "a.txt": "modified",
        "run.sh": "modified",
        "old.txt": "deleted",
        "moved.txt": "added",
        "gone.txt": "deleted",
        "blob.bin": "added",
        "link": "added",
    }
    assert "-two\n+TWO\n" in files["a.txt"]["diff"] and "+echo hello\n" in files["run.sh"]["diff"]
    assert files["run.sh"]["new_mode"] == "755" and files["blob.bin"]["binary"] is True
    assert [s["paths"] for s in changes["steps"]] == [
        ["a.txt", "notes.txt"],
        sorted(set(files) - {"a.txt", "notes.txt"}),
    ]

    listed = call_method(wire, "checkpoints")["result"]
    assert listed["enabled"] is True and [c["kind"] for c in listed["checkpoints"]] == [
        "turn",
        "step",
        "step",
        "end",
    ]

    rewound = call_method(wire, "rewind", {"turn": 1})["result"]
    assert tree(work) == {**before, "noise.log": after["noise.log"]}  # ignored files are left alone
    assert sorted(rewound["restored"]) == sorted(files) and rewound["stopped_tasks"] == []
    if repo:
        assert [
            git(work, "ls-files", "-s"),
            git(work, "for-each-ref"),
            git(work, "stash", "list"),
        ] == git_before

    undone = call_method(wire, "rewind", {"undo": True})["result"]
    assert undone["undo_of"] == rewound["id"]
    assert tree(work) == after

    # the conversation came back too: the next turn is turn 2
    messages, _ = run_turn(wire)
    assert payloads(messages, "CheckpointTaken")[0]["turn"] == 2


def test_a_hand_edit_blocks_the_rewind_until_forced(engine, sandbox):
    prepare(sandbox, repo=False)
    work = sandbox.work
    wire = engine(*TURN_ONE, args=("--yolo",))
    negotiated(wire)
    run_turn(wire)
    (work / "a.txt").write_text("edited by hand\n")
    refused = call_method(wire, "rewind", {"turn": 1, "context": False})
    assert refused["error"]["code"] == -32000
    assert refused["error"]["data"] == {"reason": "conflicts", "conflicts": ["a.txt"]}
    assert (work / "a.txt").read_text() == "edited by hand\n" and (work / "notes.txt").exists()
    forced = call_method(wire, "rewind", {"turn": 1, "context": False, "force": True})["result"]
    assert forced["forced"] == ["a.txt"] and (work / "a.txt").read_text() == "one\ntwo\nthree\n"
    call_method(wire, "rewind", {"undo": True})
    assert (work / "a.txt").read_text() == "edited by hand\n"  # the copy kept before forcing
    bad = call_method(wire, "rewind", {"turn": 9})
    assert bad["error"]["code"] == -32602 and "turn 9" in bad["error"]["message"]


@pytest.mark.parametrize("repo", [False, True], ids=["plain", "git"])
def test_a_fork_with_its_own_work_dir_leaves_the_parent_untouched(engine, sandbox, repo, tmp_path):
    prepare(sandbox, repo=repo)
    work = sandbox.work
    wire = engine(
        call("w1", "WriteFile", {"path": "a.txt", "content": "turn one\n"}),
        "text: one",
        call("w2", "WriteFile", {"path": "a.txt", "content": "turn two\n"}),
        "text: two",
        args=("--yolo",),
    )
    negotiated(wire)
    run_turn(wire, "first")
    run_turn(wire, "second")
    parent = tree(work)
    new_dir = tmp_path / "forked"
    forked = call_method(wire, "fork", {"turn": 1, "work_dir": str(new_dir)})["result"]
    assert forked["work_dir"] == str(new_dir) and forked["git_worktree"] is repo
    assert (new_dir / "a.txt").read_text() == "turn one\n"
    assert (new_dir / "run.sh").read_text() == "echo hi\n"
    assert tree(work) == parent
    if repo:
        assert git(work, "status", "--porcelain") == b" M a.txt\n"  # the parent's own change only
    (new_dir / "a.txt").write_text("fork's own line\n")
    assert (work / "a.txt").read_text() == "turn two\n"
    wire.close()

    sandbox.scripts = ["text: in the fork"]
    sandbox.write()
    fork_argv = [*sandbox.argv("--session", forked["session_id"])]
    fork_argv[fork_argv.index("--work-dir") + 1] = str(new_dir)

    fork_wire = WireProcess(fork_argv, sandbox.env(), new_dir)
    try:
        negotiated(fork_wire)
        messages, _ = run_turn(fork_wire, "in the fork")
        assert payloads(messages, "CheckpointTaken")[0]["turn"] == 2  # it holds turn 1 only
        listed = call_method(fork_wire, "checkpoints")["result"]["checkpoints"]
        assert [c["turn"] for c in listed if c["kind"] == "turn"] == [1, 2]
    finally:
        fork_wire.close()


def test_a_client_that_did_not_negotiate_sees_todays_protocol(engine, sandbox):
    prepare(sandbox, repo=False)
    wire = engine(*TURN_ONE, args=("--yolo",))
    reply = wire.initialize(protocol_version="1.10")
    assert "supports_checkpoints" not in reply["result"]["capabilities"]
    messages, _ = run_turn(wire)
    assert payloads(messages, "CheckpointTaken") == []
    assert call_method(wire, "checkpoints")["error"]["code"] == -32601
    assert call_method(wire, "rewind", {"turn": 1})["error"]["code"] == -32601
    assert (sandbox.work / "notes.txt").exists()


def test_a_rewind_stops_the_sessions_background_tasks_first_and_says_so(engine, sandbox):
    from tests.e2e.test_shell_tool import processes_running, unique_sleep

    sandbox.config_extra = CHECKPOINTS
    sandbox.write()
    duration = unique_sleep()
    background = {"command": f"sleep {duration}", "run_in_background": True, "description": "sleeper"}
    wire = engine(
        "\n".join(
            [call("w", "WriteFile", {"path": "a.txt", "content": "x\n"}), call("b", "Shell", background)]
        ),
        "text: started",
        args=("--yolo",),
    )
    negotiated(wire)
    run_turn(wire)
    assert processes_running(duration), "the background command is not running"
    rewound = call_method(wire, "rewind", {"turn": 1})["result"]
    assert len(rewound["stopped_tasks"]) == 1 and rewound["restored"] == ["a.txt"]
    assert processes_running(duration) == []  # stopped before the rewind answered
    assert not (sandbox.work / "a.txt").exists()
