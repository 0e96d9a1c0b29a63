"""The PostgreSQL store's group commit (sessions/pg_writer.py): the appends of every session of a
replica go to the database together, each session's in order; an append is durable once the
session settles; one session's fault does not cost the others their records."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from soulwire.sessions.postgres import PostgresBackend, WriteFailed

pytestmark = pytest.mark.xdist_group("postgres")


def _event(n: int) -> dict[str, Any]:
    return {"type": "ContentPart", "payload": {"type": "text", "text": f"tok{n}"}}


def _rows(url: str, session_id: str) -> list[int]:
    """The seqs another connection sees (what is committed)."""
    with psycopg.connect(url) as conn:
        return [
            int(r[0])
            for r in conn.execute("SELECT seq FROM sw_wire WHERE session_id = %s ORDER BY seq", (session_id,))
        ]


@contextmanager
def writer_held(backend: PostgresBackend) -> Iterator[None]:
    """Keep the writer inside one batch (its session row is locked by another transaction)
    until the block ends: what is submitted meanwhile queues for the next batch."""
    backend.open("blocker").save_state({"version": 1})  # the row exists
    with psycopg.connect(backend.url) as other:
        other.execute("SELECT 1 FROM sw_sessions WHERE id = 'blocker' FOR UPDATE")
        backend.open("blocker").record_wire(_event(0))  # the writer waits on the lock
        while not _waiting_on_lock(backend.url):
            pass  # polling the database's own view of the wait, not a sleep
        yield
        other.rollback()


def _waiting_on_lock(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
    return bool(row and row[0])


def test_the_appends_of_many_sessions_commit_in_one_transaction(backend: PostgresBackend, pg_url: str):
    stores = [backend.open(f"s{i}") for i in range(5)]
    with writer_held(backend):
        batches = backend.writer.batches
        for n in range(1, 4):
            for store in stores:
                store.record_wire(_event(n))
                store.append_context([{"role": "assistant", "content": f"r{n}"}])
        assert _rows(pg_url, "s0") == []  # queued: returned at once, nothing committed yet
    for store in stores:
        store.sync()
        assert _rows(pg_url, store.session_id) == [1, 2, 3]
        assert [r["content"] for r in store.load_context()] == ["r1", "r2", "r3"]
    assert backend.writer.batches == batches + 2  # the blocker's batch, then all fifteen appends


def test_state_is_the_last_one_saved_and_durable_when_save_returns(backend: PostgresBackend, pg_url: str):
    store = backend.open("st")
    store.save_state({"version": 1, "custom_title": "first"}, wait=False)
    store.save_state({"version": 1, "custom_title": "second"})
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT state->>'custom_title' FROM sw_sessions WHERE id = 'st'").fetchone()
    assert row == ("second",)


def test_one_sessions_fault_leaves_the_others_in_the_same_batch_recorded(
    backend: PostgresBackend, pg_url: str
):
    good, stale = backend.open("good"), backend.open("stale")
    stale.record_wire(_event(1))
    stale.record_wire(_event(2))
    with writer_held(backend):
        good.record_wire(_event(1))
        stale.record_wire(_event(2))  # seq 3: fine
        stale._next_seq = 2  # pyright: ignore[reportPrivateUsage]  (a second writer's stale view)
        stale.record_wire(_event(3))  # seq 2 again: the key refuses it
        good.record_wire(_event(2))
    good.sync()
    assert _rows(pg_url, "good") == [1, 2]
    with pytest.raises(WriteFailed):
        stale.sync()
    assert _rows(pg_url, "stale") == [1, 2]  # its whole part of the batch was refused


def test_close_commits_what_is_queued(backend: PostgresBackend, pg_url: str):
    store = backend.open("closing")
    for n in range(50):
        store.record_wire(_event(n))
    backend.close()
    assert _rows(pg_url, "closing") == list(range(1, 51))


def test_a_message_other_than_a_streamed_part_is_durable_with_all_before_it(
    backend: PostgresBackend, pg_url: str
):
    """What a client acts on (a tool call, a turn's end) is committed before the call returns,
    and so before any client can see it; a streamed part returns at once."""
    import threading

    store = backend.open("turn")
    store.save_state({"version": 1})  # the row exists, to be locked
    returned = threading.Event()

    def tool_call() -> None:
        store.record_wire({"type": "ToolCall", "payload": {"id": "tc-1"}})
        returned.set()

    with psycopg.connect(pg_url) as other:
        other.execute("SELECT 1 FROM sw_sessions WHERE id = 'turn' FOR UPDATE")
        for n in range(3):
            store.record_wire(_event(n))  # queued: returns while the writer cannot commit
        caller = threading.Thread(target=tool_call)
        caller.start()
        while not _waiting_on_lock(pg_url):
            pass
        assert not returned.is_set()  # the writer is stuck on the lock: the call still waits
        other.rollback()
    caller.join()
    assert returned.is_set() and _rows(pg_url, "turn") == [1, 2, 3, 4]


def test_a_lost_connection_fails_its_batch_once_and_the_session_carries_on(
    backend: PostgresBackend, pg_url: str
):
    store = backend.open("lost")
    store.record_wire(_event(1))
    store.sync()
    with psycopg.connect(pg_url) as other:
        other.execute("SELECT 1 FROM sw_sessions WHERE id = 'lost' FOR UPDATE")
        store.record_wire(_event(2))  # the writer waits on the lock, inside its batch
        while not _waiting_on_lock(pg_url):
            pass
        with psycopg.connect(pg_url, autocommit=True) as killer:  # the writer's connection dies
            killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
        other.rollback()
    with pytest.raises(WriteFailed, match="could not record session lost"):
        store.sync()
    assert _rows(pg_url, "lost") == [1]  # nothing of the batch, nothing twice
    assert store.record_wire_at({"type": "TurnEnd", "payload": {}}) == 2  # from what the database holds
    assert _rows(pg_url, "lost") == [1, 2]


def test_behind_a_gate_nothing_waits_and_a_failed_batch_takes_what_followed_it(
    backend: PostgresBackend, pg_url: str
):
    """A live session's store (sessions/pg_gate.py): no append waits for its commit; the gate
    is told what was committed, and when a batch fails, that it and everything the session
    queued after it are lost (never written: no gap); the failure is raised once, then the
    session carries on from what the database holds."""
    import threading

    from soulwire.sessions.pg_gate import CommitGate

    store = backend.open("gated")
    store.record_wire(_event(1))
    store.sync()
    recorded: list[int] = []
    lost: list[Exception] = []
    failing, committed = threading.Event(), threading.Event()
    gate = CommitGate(lambda seq, _: recorded.append(seq), committed.set, lost.append, failing.set)
    store.set_gate(gate)
    with psycopg.connect(pg_url) as other:
        other.execute("SELECT 1 FROM sw_sessions WHERE id = 'gated' FOR UPDATE")
        store.record_wire({"type": "TurnBegin", "payload": {}})  # returns: the writer is stuck
        while not _waiting_on_lock(pg_url):
            pass
        store.record_wire({"type": "StepBegin", "payload": {"n": 1}})  # queued behind it
        store.save_state({"version": 2})  # (returns at once too)
        assert gate.outcome(gate.submitted) == "pending" and not committed.is_set()
        with psycopg.connect(pg_url, autocommit=True) as killer:  # the writer's connection dies
            killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        other.rollback()
    assert failing.wait(30)
    store.take_failure()  # (the hub does this on its loop when told)
    assert len(lost) == 1 and gate.lost == (0, 3) and gate.outcome(3) == "lost"
    assert _rows(pg_url, "gated") == [1] and recorded == []
    with pytest.raises(WriteFailed, match="could not record session gated"):
        store.record_wire({"type": "TurnEnd", "payload": {}})  # raised once
    assert store.record_wire_at({"type": "TurnEnd", "payload": {}}) == 2  # from what the database holds
    assert committed.wait(30)
    assert gate.outcome(gate.submitted) == "committed" and recorded == [2]
    assert _rows(pg_url, "gated") == [1, 2]
