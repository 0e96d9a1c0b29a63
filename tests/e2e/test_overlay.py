"""Transactional sandboxed turns through the real engine, real bubblewrap and real files: a
turn whose Shell runs `sed -i`, `rm`, `mv`, `chmod +x`, writes a binary file and a symlink,
and whose file tools read and write the same overlay, leaves the work dir untouched until its
changes are committed (then exactly applied, recorded as a checkpoint) or discarded (then
gone); where the overlay cannot run the session says so in one line and writes directly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.e2e.test_checkpoints import call_method
from tests.file_tree import tree
from tests.tool_calls import call, run_turn
from tests.wire_client import Sandbox, WireProcess, payloads

pytestmark = pytest.mark.usefixtures("bwrap")

SANDBOXED = {"checkpoints": {"enabled": True}, "sandbox": "workspace-write"}
SHELL = (
    "sed -i s/hi/hello/ run.sh && chmod +x run.sh && mv old.txt moved.txt && rm gone.txt"
    " && printf 'b\\000\\001\\377' > blob.bin && ln -s a.txt link && rm -r sub && mkdir sub"
    " && echo new > sub/new.txt && cat notes.txt"
)
TURN = [
    "\n".join(
        [
            call("w", "WriteFile", {"path": "notes.txt", "content": "from the file tool\n"}),
            call("r", "StrReplaceFile", {"path": "a.txt", "edit": {"old": "two", "new": "TWO"}}),
        ]
    ),
    call("s", "Shell", {"command": SHELL}),
    call("m", "ReadFile", {"path": "moved.txt"}),
    "text: done",
]
CHANGED = {
    "a.txt": "modified",
    "blob.bin": "added",
    "gone.txt": "deleted",
    "link": "added",
    "moved.txt": "added",
    "notes.txt": "added",
    "old.txt": "deleted",
    "run.sh": "modified",
    "sub/new.txt": "added",
    "sub/old.txt": "deleted",
}


def prepare(sandbox: Sandbox) -> dict[str, object]:
    sandbox.config_extra = SANDBOXED
    sandbox.write()
    work = sandbox.work
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (work / "run.sh").write_text("echo hi\n")
    (work / "old.txt").write_text("to move\n")
    (work / "gone.txt").write_text("to delete\n")
    (work / "sub").mkdir()
    (work / "sub" / "old.txt").write_text("replaced dir\n")
    return tree(work)


def expected_after(before: dict[str, object], work: Path) -> dict[str, object]:
    after = {k: v for k, v in before.items() if k not in ("old.txt", "gone.txt", "sub/old.txt")}
    after.update(
        {
            "a.txt": (b"one\nTWO\nthree\n", 0o644),
            "run.sh": (b"echo hello\n", 0o755),
            "moved.txt": (b"to move\n", 0o644),
            "notes.txt": (b"from the file tool\n", 0o644),
            "blob.bin": (b"b\x00\x01\xff", 0o644),
            "link": ("link", "a.txt"),
            "sub/new.txt": (b"new\n", 0o644),
        }
    )
    return after


def overlay_turn(wire) -> list[dict]:
    messages, result = run_turn(wire)
    assert result == {"status": "finished"}
    results = {r["tool_call_id"]: r["return_value"] for r in payloads(messages, "ToolResult")}
    assert "from the file tool" in results["s"]["output"]  # Shell saw the file tool's write
    assert "to move" in results["m"]["output"]  # and the file tool saw Shell's rename
    return messages


def test_an_overlay_turn_is_discarded_then_committed_exactly(engine, sandbox):
    os.umask(0o022)
    before = prepare(sandbox)
    work = sandbox.work
    wire = engine(*TURN, *TURN, args=("--yolo", "--overlay", "ask"))
    reply = wire.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
    assert reply["result"]["capabilities"]["supports_overlay"] is True

    messages = overlay_turn(wire)
    pending = payloads(messages, "OverlayPending")
    assert len(pending) == 1 and {f["path"]: f["status"] for f in pending[0]["files"]} == CHANGED
    kinds = [m["params"]["type"] for m in messages if m.get("method") == "event"]
    assert kinds.index("OverlayPending") < kinds.index("TurnEnd")  # a UI shows it as the turn ends
    assert tree(work) == before  # nothing reached the work dir

    discarded = call_method(wire, "overlay_discard")["result"]
    assert discarded["action"] == "discard" and len(discarded["files"]) == len(CHANGED)
    assert tree(work) == before

    overlay_turn(wire)  # the same turn again, now committed
    assert tree(work) == before
    committed = call_method(wire, "overlay_commit")["result"]
    assert {f["path"]: f["status"] for f in committed["files"]} == CHANGED
    assert tree(work) == expected_after(before, work)
    assert committed["checkpoint"] is not None

    changes = call_method(wire, "changes", {"turn": 2})["result"]
    assert {f["path"]: f["status"] for f in changes["files"]} == CHANGED
    again = call_method(wire, "overlay_commit")["result"]  # nothing pending: nothing done
    assert again["files"] == [] and tree(work) == expected_after(before, work)

    call_method(wire, "rewind", {"turn": 2, "context": False})  # a commit is rewound like any turn
    assert tree(work) == before


@pytest.mark.parametrize("policy", ["commit", "discard"])
def test_a_policy_decides_at_the_turns_end(engine, sandbox, policy):
    os.umask(0o022)
    before = prepare(sandbox)
    wire = engine(*TURN, args=("--yolo", "--overlay", policy))
    wire.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
    messages = overlay_turn(wire)
    assert payloads(messages, "OverlayPending") == []
    applied = payloads(messages, "OverlayApplied")
    assert [a["action"] for a in applied] == [policy]
    assert {f["path"]: f["status"] for f in applied[0]["files"]} == CHANGED
    want = expected_after(before, sandbox.work) if policy == "commit" else before
    assert tree(sandbox.work) == want
    if policy == "commit":  # the turn's own end checkpoint holds the commit
        changes = call_method(wire, "changes", {"turn": 1})["result"]
        assert {f["path"]: f["status"] for f in changes["files"]} == CHANGED


def test_an_old_client_sees_no_overlay_events_or_methods(engine, sandbox):
    prepare(sandbox)
    wire = engine(*TURN, args=("--yolo", "--overlay", "ask"))
    reply = wire.initialize(protocol_version="1.10")
    assert "supports_overlay" not in reply["result"]["capabilities"]
    messages, _ = run_turn(wire)
    assert payloads(messages, "OverlayPending") == []
    response = call_method(wire, "overlay_commit")
    assert response["error"]["code"] == -32601


def test_without_an_overlay_one_line_says_so_and_turns_write_directly(sandbox, tmp_path):
    prepare(sandbox)
    bin_dir = tmp_path / "bin"  # bubblewrap and a shell, but no nsenter: the overlay cannot run
    bin_dir.mkdir()
    for tool in ("bwrap", "true", "sh", "bash", "sed", "chmod", "mv", "rm", "ln", "mkdir", "cat"):
        for where in ("/usr/bin", "/bin"):
            if Path(where, tool).exists():
                (bin_dir / tool).symlink_to(Path(where, tool))
                break
    sandbox.scripts = TURN
    sandbox.write()
    env = {**sandbox.env(), "PATH": str(bin_dir)}
    wire = WireProcess(sandbox.argv("--yolo", "--overlay", "ask"), env, sandbox.work)
    try:
        wire.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
        messages, _ = run_turn(wire)
        assert payloads(messages, "OverlayPending") == []
        assert (sandbox.work / "notes.txt").read_text() == "from the file tool\n"  # written directly
        changes = call_method(wire, "changes", {"turn": 1})["result"]  # and recorded by the checkpoints
        assert {f["path"] for f in changes["files"]} >= {"notes.txt", "a.txt"}
    finally:
        wire.close()
    lines = [line.rstrip("\n") for line in wire.stderr_lines if "overlay" in line]
    assert lines == [
        "soulwire: --overlay ask is not available here (`nsenter` (util-linux) is not installed); "
        "turns write the work dir directly"
    ]


def test_a_commit_killed_midway_leaves_each_file_old_or_new_and_is_finished_on_resume(engine, sandbox):
    sandbox.config_extra = SANDBOXED
    sandbox.write()
    work = sandbox.work
    old, new = b"old\n" * 4096, b"new\n" * 4096
    for i in range(400):
        (work / f"f{i:04}.txt").write_bytes(old)
    rewrite = call("s", "Shell", {"command": "sed -i s/old/new/ f*.txt"})
    wire = engine(rewrite, "text: done", "text: resumed", args=("--yolo", "--overlay", "ask"))
    wire.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
    messages, _ = wire.prompt("go", timeout=120)  # 400 files read, rewritten and compared
    assert len(payloads(messages, "OverlayPending")[0]["files"]) == 400
    marker = next(sandbox.share.glob("sessions/**/overlay")) / "COMMITTING"
    wire.request("overlay_commit", {})
    deadline = time.monotonic() + 60
    while not marker.exists():  # the commit has begun: kill it there
        assert time.monotonic() < deadline, "the commit never started"
    os.killpg(wire.proc.pid, signal.SIGKILL)
    wire.proc.wait(timeout=30)
    assert marker.exists(), "the commit finished before the kill: the test proves nothing"
    contents = [(work / f"f{i:04}.txt").read_bytes() for i in range(400)]
    assert all(c in (old, new) for c in contents)  # never half-written
    assert not list(work.glob(".*.soulwire-restore"))[1:]  # at most the one being written

    resumed = engine(args=("--yolo", "--overlay", "ask", "--continue"))
    resumed.initialize(protocol_version="1.10", capabilities={"supports_checkpoints": True})
    assert [(work / f"f{i:04}.txt").read_bytes() for i in range(400)] == [new] * 400
    assert not marker.exists() and not list(work.glob(".*.soulwire-restore"))
    _, result = run_turn(resumed)  # and the session goes on
    assert result == {"status": "finished"}


def test_print_mode_keeps_asked_changes_pending_and_says_how_to_choose(sandbox):
    prepare(sandbox)
    sandbox.scripts = [call("s", "Shell", {"command": "echo x > made.txt"}), "text: done"]
    sandbox.write()
    argv = [a for a in sandbox.argv("--yolo", "--overlay", "ask", "--print", "-p", "go") if a != "--wire"]
    run = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=sandbox.env(),
        cwd=sandbox.work,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert not (sandbox.work / "made.txt").exists()
    assert (
        "soulwire: 1 changed file(s) wait in the overlay, not in the work dir; commit or discard"
        in run.stderr
    )
