"""The PostgreSQL store passes the shipped conformance checks unchanged, keeps a schema version,
and says in one line what is wrong with a database it cannot use."""

from __future__ import annotations

import pytest

from soulwire.sessions.conformance import CHECKS
from soulwire.sessions.postgres import (
    SCHEMA_VERSION,
    PostgresBackend,
    SchemaTooNewError,
    StoreError,
    WriteFailed,
    redact,
)

# pytest-xdist (--dist loadgroup): one throwaway cluster (the session fixture pg_cluster) for
# every store test, in one worker.
pytestmark = pytest.mark.xdist_group("postgres")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_conformance(backend: PostgresBackend, check):
    check(backend.open)


def test_migrate_is_idempotent_and_versioned(backend: PostgresBackend):
    assert backend.schema_version() == SCHEMA_VERSION
    assert backend.migrate() == SCHEMA_VERSION  # nothing left to do
    backend.check_schema()


def test_a_newer_schema_is_refused_in_one_line(backend: PostgresBackend):
    with backend.pool.connection() as conn:
        conn.execute("INSERT INTO soulwire_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNewError) as caught:
        backend.check_schema()
    assert "newer than this Soulwire knows" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(SchemaTooNewError):
        backend.migrate()


def test_an_unmigrated_database_names_the_command(pg_url: str):
    backend = PostgresBackend(pg_url)
    backend.open_pool()
    try:
        with pytest.raises(StoreError, match="--migrate-only"):
            backend.check_schema()
    finally:
        backend.close()


def test_wire_messages_get_consecutive_seq_across_reopens(backend: PostgresBackend):
    store = backend.open("s")
    assert [store.record_wire_at({"type": "StepBegin", "payload": {"n": i}}) for i in (1, 2)] == [1, 2]
    again = backend.open("s")
    assert again.record_wire_at({"type": "TurnEnd", "payload": {}}) == 3
    assert [seq for seq, _ in again.wire_rows(since_seq=1)] == [2, 3]


def test_a_second_writer_with_a_stale_seq_fails_instead_of_interleaving(backend: PostgresBackend):
    import psycopg

    one, two = backend.open("shared"), backend.open("shared")
    one.record_wire({"type": "TurnBegin", "payload": {"user_input": "a"}})
    two.record_wire({"type": "TurnBegin", "payload": {"user_input": "b"}})  # reads seq 2
    two.sync()  # committed (as another replica would)
    with pytest.raises(WriteFailed, match="duplicate key") as caught:
        one.record_wire({"type": "TurnEnd", "payload": {}})  # still believes seq 2 is free
    assert isinstance(caught.value.__cause__, psycopg.errors.UniqueViolation)
    assert [m["payload"].get("user_input") for m in two.wire_records()] == ["a", "b"]
    # the failure is told once; the store then starts again from what the database holds
    assert one.record_wire_at({"type": "TurnEnd", "payload": {}}) == 3


def test_objects_are_content_addressed_and_checkpoints_ordered(backend: PostgresBackend):
    store = backend.open("ck")
    store.put_objects({"d1": b"\x00bytes", "d2": b"more"})
    store.put_objects({"d1": b"ignored: already kept"})
    assert store.get_object("d1") == b"\x00bytes"
    assert store.has_object("d2") and not store.has_object("d3")
    store.append_checkpoint({"id": 1})
    store.append_checkpoint({"id": 2})
    assert [r["id"] for r in store.checkpoint_records()] == [1, 2]


def test_truncate_history_keeps_the_first_records(backend: PostgresBackend):
    store = backend.open("rw")
    store.append_context([{"role": "user", "content": str(i)} for i in range(5)])
    for i in range(4):
        store.record_wire({"type": "StepBegin", "payload": {"n": i}})
    store.truncate_history(2, 3)
    assert [r["content"] for r in store.load_context()] == ["0", "1"]
    assert [m["payload"]["n"] for m in store.wire_records()] == [0, 1, 2]
    assert store.record_wire_at({"type": "TurnEnd", "payload": {}}) == 4


def test_a_wrong_password_is_one_line_without_the_password(pg_cluster):
    url = pg_cluster.url().replace(":s3cret-for-tests@", ":wrong@")
    backend = PostgresBackend(url)
    with pytest.raises(StoreError) as caught:
        backend.open_pool(wait_s=2)
    message = str(caught.value)
    assert "password authentication failed" in message
    assert "wrong" not in message and "\n" not in message


def test_a_database_that_is_down_is_one_line(pg_cluster):
    backend = PostgresBackend(f"postgresql://soulwire@127.0.0.1:{_closed_port()}/postgres")
    with pytest.raises(StoreError, match="cannot connect to the session store"):
        backend.open_pool(wait_s=1)


def test_redact_hides_the_password():
    assert "hunter2" not in redact("postgresql://u:hunter2@h:5/db")


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
