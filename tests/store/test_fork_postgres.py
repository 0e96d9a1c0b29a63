"""Forking a session on the PostgreSQL store: the records up to the end of a turn are copied in
the database (the checkpoints too: their objects are the store's, shared), and a fork with its
own work dir gets the files as they were at the end of that turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from soulwire.sessions.checkpoints.book import CheckpointBook
from soulwire.sessions.checkpoints.forking import fork_with_files
from soulwire.sessions.fork import ForkError, fork_from_store
from soulwire.sessions.postgres import PostgresBackend, PostgresSessionStore
from tests.file_tree import tree

pytestmark = pytest.mark.xdist_group("postgres")


def _turn(store: PostgresSessionStore, book: CheckpointBook, n: int, work: Path) -> None:
    text = f"turn {n}"
    store.record_wire({"type": "TurnBegin", "payload": {"user_input": text}})
    store.append_context([{"role": "user", "content": text}])
    book.take(turn=n, kind="turn")
    (work / "f.txt").write_text(f"v{n}\n")
    store.record_wire({"type": "ContentPart", "payload": {"type": "text", "text": f"did {n}"}})
    store.append_context([{"role": "assistant", "content": f"did {n}"}])
    store.record_wire({"type": "TurnEnd", "payload": {}})
    book.take(turn=n, kind="end")


@pytest.fixture
def two_turns(backend: PostgresBackend, tmp_path: Path) -> tuple[PostgresSessionStore, CheckpointBook]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text("v0\n")
    store = backend.open("source", work_dir=str(work))
    store.share = tmp_path / "share"
    book = CheckpointBook(store, str(work))
    for n in (1, 2):
        _turn(store, book, n, work)
    return store, book


def test_a_fork_at_a_turn_keeps_that_turn_and_its_checkpoints(two_turns, backend: PostgresBackend):
    source, _ = two_turns
    new_id = fork_from_store(source, source.work_dir, turns=1)
    fork = backend.open(new_id, work_dir=source.work_dir)
    kinds = [m["type"] for m in fork.wire_records()]
    assert kinds == ["TurnBegin", "ContentPart", "TurnEnd"]
    assert [r["content"] for r in fork.load_context()] == ["turn 1", "did 1"]
    assert {r.get("turn") for r in fork.checkpoint_records()} == {1}
    assert fork.load_state()["custom_title"] == "Fork of turn 1"
    assert len([m for m in source.wire_records() if m["type"] == "TurnBegin"]) == 2  # untouched
    whole = backend.open(fork_from_store(source, source.work_dir, title="all"), work_dir=source.work_dir)
    assert list(whole.wire_records()) == list(source.wire_records())
    assert list(whole.checkpoint_records()) == list(source.checkpoint_records())
    with pytest.raises(ForkError, match="has 2 turns"):
        fork_from_store(source, source.work_dir, turns=3)


def test_a_fork_with_its_own_work_dir_has_the_files_of_that_turn(
    two_turns, backend: PostgresBackend, tmp_path
):
    source, book = two_turns
    target = tmp_path / "forked"
    result = fork_with_files(book, source.share, source.dir, turns=1, new_work_dir=str(target))
    assert tree(target) == {"f.txt": (b"v1\n", 0o644)}
    assert result["work_dir"] == str(target) and result["files"] == 1
    fork = backend.open(result["session_id"], work_dir=str(target))
    assert [m["type"] for m in fork.wire_records()] == ["TurnBegin", "ContentPart", "TurnEnd"]
    with backend.pool.connection() as conn:  # a session of the database, listed by every replica
        row = conn.execute(
            "SELECT work_dir FROM sw_sessions WHERE id = %s", (result["session_id"],)
        ).fetchone()
    assert row == (str(target),)
