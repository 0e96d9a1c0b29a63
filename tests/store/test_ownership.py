"""Session ownership in the shared store (sessions/ownership.py): one owner at a time, released
at once with its connection (a killed replica), and taken from a hung one once its lease ran out."""

from __future__ import annotations

import psycopg
import pytest

from soulwire.sessions.ownership import OwnedElsewhere, Ownership, OwnershipLost
from soulwire.sessions.postgres import PostgresBackend
from tests.store.test_serve_replicas import wait_for


def owners(backend: PostgresBackend, url: str, lease_s: float = 30.0) -> tuple[Ownership, Ownership]:
    return Ownership(url, owner="http://a:1", lease_s=lease_s), Ownership(
        url, owner="http://b:2", lease_s=lease_s
    )


def acquired(ownership: Ownership, session_id: str) -> bool:
    try:
        ownership.acquire(session_id)
    except OwnedElsewhere:
        return False
    return True


def test_one_owner_at_a_time_and_a_closed_connection_frees_its_sessions(
    backend: PostgresBackend, pg_url: str
):
    a, b = owners(backend, pg_url)
    try:
        a.acquire("s1")
        with pytest.raises(OwnedElsewhere) as refused:
            b.acquire("s1")
        assert refused.value.owner == "http://a:1" and b.owner_of("s1") == "http://a:1"
        b.acquire("s2")  # other sessions are free
        a.release("s1")
        b.acquire("s1")
        assert a.owner_of("s1") == "http://b:2"
        b.close()  # as a killed replica's connection closes: its locks go at once
        # (once the server has seen the connection close: its backend ends a moment later)
        assert wait_for(lambda: acquired(a, "s1"))
        a.acquire("s2")
        a.renew()
    finally:
        a.close()
        b.close()


def test_a_hung_owner_loses_its_sessions_when_its_lease_runs_out(backend: PostgresBackend, pg_url: str):
    a, b = owners(backend, pg_url, lease_s=30.0)
    try:
        a.acquire("s1")
        with psycopg.connect(pg_url, autocommit=True) as conn:  # A stopped renewing: its lease ran out
            conn.execute("UPDATE sw_owners SET expires_at = now() - interval '1 second'")
        b.acquire("s1")  # ends A's connection (and its locks), then owns the session
        with pytest.raises(OwnershipLost):
            a.renew()
        assert a.held == set()
        with pytest.raises(OwnedElsewhere):
            a.acquire("s1")
    finally:
        a.close()
        b.close()
