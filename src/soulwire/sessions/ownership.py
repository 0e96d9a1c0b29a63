"""Which replica runs a session: ownership in the shared PostgreSQL store.

A replica owns a session while it holds two things: a session-level advisory lock on its own
dedicated connection (it ends by itself the moment that connection closes: a killed process)
and a lease row in `sw_owners` naming its advertised address, renewed by a heartbeat. The lease
is timed by the database's clock, so a replica whose clock is off changes nothing. A replica
that is alive but hung keeps its connection, and with it the lock: once its lease has run out,
a replica that wants the session ends the hung one's connection (`pg_terminate_backend`), which
releases every lock it held. Two replicas therefore never run one session's turn, and a dead
owner's sessions can be taken within the lease time at most.

Blocking calls (psycopg's synchronous API): a server runs them on worker threads."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, LiteralString

from soulwire.errors import SoulwireError
from soulwire.ids import uuid4

if TYPE_CHECKING:
    from psycopg import Connection

DEFAULT_LEASE_S = 10.0
_KEY: LiteralString = "hashtextextended('soulwire-session:' || %s, 0)"
"""The advisory lock's 64-bit key for a session id."""


class OwnedElsewhere(SoulwireError):
    """Another live replica owns the session; `owner` is its advertised address ('' unknown)."""

    def __init__(self, session_id: str, owner: str) -> None:
        where = f" at {owner}" if owner else ""
        super().__init__(f"session {session_id} is run by another replica{where}")
        self.session_id = session_id
        self.owner = owner


class OwnershipLost(SoulwireError):
    """The replica owns none of its sessions any more: another replica took them over (this
    one looked hung)."""


class StoreUnreachable(OwnershipLost):
    """The ownership connection broke or cannot be made (the database is down): the locks
    went with it."""


class Ownership:
    """This replica's ownership of sessions (see the module docstring)."""

    def __init__(self, url: str, *, owner: str, lease_s: float = DEFAULT_LEASE_S) -> None:
        self.url = url
        self.owner = owner
        """The address clients of another replica are sent to (`serve --advertise`)."""
        self.replica = uuid4()
        self.lease_s = lease_s
        self.held: set[str] = set()
        self._conn: Connection[tuple[Any, ...]] | None = None
        self._lock = threading.Lock()  # one statement at a time on the one connection

    def _connection(self) -> Connection[tuple[Any, ...]]:
        import psycopg

        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if self.held:  # locks of a connection that broke are gone with it
                self.held.clear()
                raise StoreUnreachable("the connection to the session store was lost")
            try:
                conn = self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
            except psycopg.OperationalError as exc:
                raise StoreUnreachable("cannot connect to the session store") from exc
        return conn

    def acquire(self, session_id: str) -> None:
        """Own the session, or raise OwnedElsewhere (psycopg.Error when the store is down)."""
        with self._lock:
            if session_id in self.held:
                return
            conn = self._connection()
            for _ in range(3):
                row = conn.execute(f"SELECT pg_try_advisory_lock({_KEY})", (session_id,)).fetchone()
                if row and row[0]:
                    conn.execute(
                        "INSERT INTO sw_owners (session_id, owner, replica, backend_pid, expires_at)"
                        " VALUES (%s, %s, %s, pg_backend_pid(), now() + make_interval(secs => %s))"
                        " ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner,"
                        " replica = EXCLUDED.replica, backend_pid = EXCLUDED.backend_pid,"
                        " expires_at = EXCLUDED.expires_at",
                        (session_id, self.owner, self.replica, self.lease_s),
                    )
                    self.held.add(session_id)
                    return
                lease = conn.execute(
                    "SELECT owner, backend_pid, expires_at > now() FROM sw_owners WHERE session_id = %s",
                    (session_id,),
                ).fetchone()
                if lease is None or lease[2]:
                    raise OwnedElsewhere(session_id, str(lease[0]) if lease else "")
                # The lease ran out while the lock is held: its holder is hung. End its
                # connection (and so its locks), then try again.
                self._end_backend(conn, int(lease[1]))
            raise OwnedElsewhere(session_id, "")

    def _end_backend(self, conn: Connection[tuple[Any, ...]], pid: int) -> None:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
            if not row or not row[0]:
                return
            time.sleep(0.05)  # polling the server's own view: nothing to wait on instead

    def release(self, session_id: str) -> None:
        """Give the session up (its lease row goes; another replica may take it at once)."""
        with self._lock:
            if session_id not in self.held:
                return
            self.held.discard(session_id)
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                return
            conn.execute(
                "DELETE FROM sw_owners WHERE session_id = %s AND replica = %s", (session_id, self.replica)
            )
            conn.execute(f"SELECT pg_advisory_unlock({_KEY})", (session_id,))

    def renew(self) -> None:
        """The heartbeat: extend the leases of every session held (OwnershipLost when the
        connection broke, or the leases were taken from a replica that looked hung)."""
        with self._lock:
            if not self.held:
                return
            conn = self._connection()
            try:
                cursor = conn.execute(
                    "UPDATE sw_owners SET expires_at = now() + make_interval(secs => %s)"
                    " WHERE replica = %s AND backend_pid = pg_backend_pid()",
                    (self.lease_s, self.replica),
                )
            except Exception as exc:
                self.held.clear()
                raise StoreUnreachable("the connection to the session store was lost") from exc
            if cursor.rowcount < len(self.held):
                self.held.clear()
                raise OwnershipLost("another replica took this replica's sessions over")

    def probe(self) -> None:
        """Reach the database (StoreUnreachable when it cannot be): whether it is back."""
        with self._lock:
            try:
                self._connection().execute("SELECT 1")
            except StoreUnreachable:
                raise
            except Exception as exc:
                raise StoreUnreachable("the connection to the session store was lost") from exc

    def owners(self) -> dict[str, str]:
        """Session id → the address of the live replica that owns it, for every session another
        live replica owns (one query for a listing)."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT session_id, owner FROM sw_owners WHERE replica <> %s AND expires_at > now()",
                    (self.replica,),
                )
                .fetchall()
            )
        return {str(i): str(o) for i, o in rows if str(i) not in self.held}

    def owner_of(self, session_id: str) -> str | None:
        """The address of the live replica that owns the session, if another one does."""
        if session_id in self.held:
            return None
        with self._lock:
            row = (
                self._connection()
                .execute(
                    "SELECT owner FROM sw_owners"
                    " WHERE session_id = %s AND replica <> %s AND expires_at > now()",
                    (session_id, self.replica),
                )
                .fetchone()
            )
        return str(row[0]) if row else None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self.held.clear()


__all__ = ["DEFAULT_LEASE_S", "OwnedElsewhere", "Ownership", "OwnershipLost", "StoreUnreachable"]
