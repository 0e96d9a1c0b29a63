"""The checkpoint library on real files, over both session stores: what a turn changed
(file tools and shell-style edits alike), rewind and its undo, conflicts with hand edits,
.gitignore and caps, a git repository left untouched, and a fork's own copy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.file_tree import tree

from soulwire.sessions.checkpoints.book import CheckpointBook, CheckpointError, RewindConflict
from soulwire.sessions.memory import MemorySessionStore
from soulwire.sessions.store import FileSessionStore


def _store(kind: str, tmp_path: Path):
    if kind == "file":
        return FileSessionStore(tmp_path / "share", tmp_path / "work", "s", protocol_version="1.3")
    return MemorySessionStore("s")


def _turn(store, book: CheckpointBook, n: int, text: str) -> None:
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": text}})
    store.append_context([{"role": "user", "content": text}])
    book.take(turn=n, kind="turn")


def _end(store, book: CheckpointBook, n: int) -> None:
    store.append_context([{"role": "assistant", "content": f"done {n}"}])
    store.record_wire({"type": "TurnEnd", "payload": {}})
    book.take(turn=n, kind="end")


@pytest.fixture(params=["file", "memory"])
def kind(request):
    return request.param


@pytest.mark.parametrize("git", [False, True], ids=["plain", "git"])
def test_every_kind_of_edit_is_shown_and_rewound_exactly(kind, git, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\ntwo\nthree\n")
    (work / "run.sh").write_text("echo hi\n")
    (work / "old.txt").write_text("moved\n")
    (work / "gone.txt").write_text("bye\n")
    (work / ".gitignore").write_text("*.log\n")
    (work / "noise.log").write_text("ignored\n")
    if git:
        subprocess.run(["git", "init", "-q"], cwd=work, check=True)
        subprocess.run(["git", "add", "-A"], cwd=work, check=True)
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], cwd=work, check=True
        )
        git_state = [
            subprocess.run(c, cwd=work, capture_output=True, check=True).stdout
            for c in (["git", "ls-files", "-s"], ["git", "for-each-ref"], ["git", "stash", "list"])
        ]
    store = _store(kind, tmp_path)
    book = CheckpointBook(store, str(work))
    before = tree(work)
    _turn(store, book, 1, "edit everything")
    (work / "a.txt").write_text("one\nTWO\nthree\n")
    subprocess.run(["sed", "-i", "s/hi/hello/", "run.sh"], cwd=work, check=True)
    subprocess.run(["chmod", "+x", "run.sh"], cwd=work, check=True)
    subprocess.run(["mv", "old.txt", "new.txt"], cwd=work, check=True)
    subprocess.run(["rm", "gone.txt"], cwd=work, check=True)
    (work / "blob.bin").write_bytes(bytes(range(256)) * 4)
    os.symlink("a.txt", work / "link")
    (work / "more.log").write_text("still ignored\n")
    _end(store, book, 1)

    changes = {f["path"]: f for f in book.changes(1)["files"]}
    assert {p: f["status"] for p, f in changes.items()} == {
        "a.txt": "modified",
        "run.sh": "modified",
        "old.txt": "deleted",
        "new.txt": "added",
        "gone.txt": "deleted",
        "blob.bin": "added",
        "link": "added",
    }
    assert "-two\n+TWO\n" in changes["a.txt"]["diff"]
    assert changes["run.sh"]["old_mode"] == "644" and changes["run.sh"]["new_mode"] == "755"
    assert changes["blob.bin"]["binary"] is True and "diff" not in changes["blob.bin"]
    assert changes["link"]["kind"] == "symlink"

    result = book.rewind(1, current_turn=1)
    assert tree(work) == {**before, "more.log": (b"still ignored\n", 0o644)}
    assert result["restored"] == sorted(changes)
    assert list(store.load_context()) == [] and list(store.wire_records()) == []
    if git:
        after = [
            subprocess.run(c, cwd=work, capture_output=True, check=True).stdout
            for c in (["git", "ls-files", "-s"], ["git", "for-each-ref"], ["git", "stash", "list"])
        ]
        assert after == git_state


def test_a_hand_edit_blocks_the_rewind_and_force_keeps_a_copy(kind, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text("v0\n")
    store = _store(kind, tmp_path)
    book = CheckpointBook(store, str(work))
    _turn(store, book, 1, "t1")
    (work / "f.txt").write_text("v1\n")
    (work / "other.txt").write_text("agent\n")
    _end(store, book, 1)
    (work / "f.txt").write_text("by hand\n")
    with pytest.raises(RewindConflict) as refused:
        book.rewind(1, current_turn=1)
    assert refused.value.paths == ["f.txt"]
    assert (work / "f.txt").read_text() == "by hand\n" and (work / "other.txt").exists()
    result = book.rewind(1, force=True, current_turn=1)
    assert result["forced"] == ["f.txt"]
    assert (work / "f.txt").read_text() == "v0\n" and not (work / "other.txt").exists()
    undone = book.undo(current_turn=0)
    assert (work / "f.txt").read_text() == "by hand\n"  # the copy kept before the forced rewind
    assert (work / "other.txt").read_text() == "agent\n"
    assert [m["type"] for m in store.wire_records()] == ["TurnBegin", "TurnEnd"]
    assert undone["undo_of"] == result["id"]
    book.undo()  # the undo is a rewind too: undoing it redoes
    assert (work / "f.txt").read_text() == "v0\n"


def test_files_only_and_context_only(kind, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    store = _store(kind, tmp_path)
    book = CheckpointBook(store, str(work))
    for n in (1, 2):
        _turn(store, book, n, f"t{n}")
        (work / f"t{n}.txt").write_text(f"{n}\n")
        _end(store, book, n)
    book.rewind(2, files=True, context=False, current_turn=2)
    assert not (work / "t2.txt").exists() and len(list(store.wire_records())) == 4
    book.rewind(2, files=False, context=True, current_turn=2)
    assert (work / "t1.txt").exists() and [m["type"] for m in store.wire_records()] == [
        "TurnBegin",
        "TurnEnd",
    ]
    assert [r["role"] for r in store.load_context()] == ["user", "assistant"]
    with pytest.raises(CheckpointError):
        book.rewind(7)


def test_unchanged_files_are_not_read_again_and_bytes_are_stored_once(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for i in range(50):
        (work / f"f{i}.txt").write_text("same content\n")
    store = _store("file", tmp_path)
    book = CheckpointBook(store, str(work))
    first = book.take(turn=1, kind="turn")
    assert first["files"] == 50 and first["bytes_stored"] == len("same content\n")
    os.utime(work / "f1.txt", ns=(1, 1))  # settle the racy window for one file
    second = book.take(turn=1, kind="end")
    assert second["files_changed"] == 0 and second["bytes_stored"] == 0
    (work / "f2.txt").write_text("new\n")
    third = book.take(turn=2, kind="turn")
    assert third["files_changed"] == 1 and third["bytes_stored"] == 4


def test_caps_are_reported(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.bin").write_bytes(b"x" * 2000)
    (work / "a.txt").write_text("a" * 600)
    (work / "b.txt").write_text("b" * 600)
    book = CheckpointBook(
        _store("memory", tmp_path), str(work), max_file_bytes=1000, max_checkpoint_bytes=1000
    )
    record = book.take(turn=1, kind="turn")
    reasons = {s["path"]: s["reason"] for s in record["skipped"]}
    assert "per-file cap" in reasons["big.bin"]
    assert len([r for r in reasons.values() if "per-checkpoint cap" in r]) == 1
    (work / "big.bin").write_bytes(b"y" * 2000)
    book.take(turn=1, kind="end")
    assert (work / "big.bin").read_bytes() == b"y" * 2000
    book.rewind(1, context=False)
    assert (work / "big.bin").read_bytes() == b"y" * 2000  # never stored, so never touched


def test_export_for_a_fork_and_reopening(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    store = _store("file", tmp_path)
    book = CheckpointBook(store, str(work))
    _turn(store, book, 1, "t1")
    (work / "sub").mkdir()
    (work / "sub" / "x.txt").write_text("turn one\n")
    _end(store, book, 1)
    _turn(store, book, 2, "t2")
    (work / "sub" / "x.txt").write_text("turn two\n")
    _end(store, book, 2)
    store.close()
    again = CheckpointBook(FileSessionStore(tmp_path / "share", work, "s", protocol_version="1.3"), str(work))
    assert [r["kind"] for r in again.checkpoints()] == ["turn", "end", "turn", "end"]
    fork = tmp_path / "fork"
    again.export(1, str(fork))
    assert (fork / "sub" / "x.txt").read_text() == "turn one\n"
    assert (work / "sub" / "x.txt").read_text() == "turn two\n"


def test_a_process_appends_its_objects_to_one_pack_and_a_rewind_leaves_no_old_file_behind(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    store = FileSessionStore(tmp_path / "share", work, "s", protocol_version="1.3")
    book = CheckpointBook(store, str(work))
    packs = store.dir / "checkpoints" / "packs"
    for n in range(1, 6):
        (work / f"f{n}.txt").write_text(f"version {n}\n")
        book.take(turn=n, kind="turn")
    assert len(os.listdir(packs)) == 1  # not a file per checkpoint
    store.close()
    again = FileSessionStore(tmp_path / "share", work, "s", protocol_version="1.3")
    book = CheckpointBook(again, str(work))
    (work / "f1.txt").write_text("changed by the next process\n")
    book.take(turn=6, kind="turn")
    assert len(os.listdir(packs)) == 2  # its own pack: no writer appends to another's
    book.rewind(2, context=False, current_turn=6)
    assert tree(work) == {"f1.txt": (b"version 1\n", 0o644), "f2.txt": (b"version 2\n", 0o644)}
    from soulwire.sessions.checkpoints.restore import wait_retired

    wait_retired()
    assert os.listdir(again.dir / "checkpoints" / "retired") == []  # the replaced file, removed
