"""The SessionStore protocol on PostgreSQL: sessions shared by replicas of `soulwire serve`.

Appends (wire messages, context records, state) go through the replica's group-commit writer
(sessions/pg_writer.py): the call returns at once, and the session's next read, `sync`, other
write or close waits until they are committed. Every other write is one transaction, committed
before the call returns. Records are kept as the JSON text they were written as, so `wire_records_verbatim`
returns exactly what was stored and a caller mutating a dict afterwards changes nothing.
Wire messages carry their `seq` (1, 2, … per session) as the primary key: a second writer of
the same session fails on the key instead of interleaving. The schema is versioned in
`soulwire_schema`; `PostgresBackend.migrate` creates or upgrades it under an advisory lock and
refuses a schema newer than this code knows.

psycopg is imported here only, when a PostgreSQL store is opened (`soulwire[postgres]`)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, LiteralString, cast

from soulwire.errors import SoulwireError
from soulwire.sessions.paths import ensure_private_dir, session_dir
from soulwire.sessions.pg_gate import CommitGate
from soulwire.sessions.pg_writer import LIVE_CHANNEL, WIRE_CHANNEL, GroupWriter, WriteFailed
from soulwire.sessions.store import StoreUnavailable, new_session_id

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

SCHEMA_VERSION = 4
"""The newest schema this code writes; a database at a higher version is refused."""

_OUTAGE_WAIT_S = 1.0
"""How long a caller waits for a connection while the database looks down."""
RECONNECT_GIVE_UP_S = 3.0
"""How long the pool retries a lost connection before it gives the slot up. Its retries back
off (1 s, 2 s, 4 s… up to psycopg_pool's default of five minutes in all), so after an outage of
half a minute the next try could be 30 s away while the database is back and callers time out
after 10 s; a slot given up is tried again at once by the next caller that needs one."""

WIRE_ROWS_AFTER: LiteralString = (
    "SELECT seq, message FROM sw_wire WHERE session_id = %s AND seq > %s ORDER BY seq"
)
RECENT_WIRE_ROWS: LiteralString = (
    "SELECT seq, message FROM sw_wire WHERE session_id = %s AND seq > ("
    " SELECT coalesce(max(seq), 0) FROM sw_wire WHERE session_id = %s) - %s ORDER BY seq"
)
LIVE_ROWS_AFTER: LiteralString = (
    "SELECT n, after_seq, line FROM sw_live WHERE session_id = %s AND n > %s ORDER BY n"
)
LAST_LIVE_ROW: LiteralString = "SELECT coalesce(max(n), 0) FROM sw_live WHERE session_id = %s"
LAST_SEQ: LiteralString = "SELECT coalesce(max(seq), 0) FROM sw_wire WHERE session_id = %s"

_MIGRATION_LOCK = 0x50575357  # "SWSW": one migrating replica at a time

_MIGRATIONS: dict[int, tuple[LiteralString, ...]] = {
    1: (
        """CREATE TABLE sw_sessions (
            id text PRIMARY KEY,
            work_dir text NOT NULL DEFAULT '',
            generation integer NOT NULL DEFAULT 1,
            state jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )""",
        # generation: the live context is sessions.generation, archives are the lower ones
        """CREATE TABLE sw_context (
            session_id text NOT NULL,
            generation integer NOT NULL,
            n bigint GENERATED ALWAYS AS IDENTITY,
            record text NOT NULL,
            PRIMARY KEY (session_id, generation, n)
        )""",
        """CREATE TABLE sw_wire (
            session_id text NOT NULL,
            seq bigint NOT NULL,
            kind text NOT NULL,
            recorded_at double precision NOT NULL,
            message text NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        "CREATE INDEX sw_wire_turns ON sw_wire (session_id, seq) WHERE kind IN ('TurnBegin', 'TurnEnd')",
        "CREATE TABLE sw_objects (digest text PRIMARY KEY, data bytea NOT NULL)",
        """CREATE TABLE sw_checkpoints (
            session_id text NOT NULL,
            n bigint GENERATED ALWAYS AS IDENTITY,
            record text NOT NULL,
            PRIMARY KEY (session_id, n)
        )""",
    ),
    # 2: who runs each session (sessions/ownership.py). The lease is timed by the database's
    # clock, never a replica's, so a replica whose clock is off neither steals nor keeps one.
    2: (
        """CREATE TABLE sw_owners (
            session_id text PRIMARY KEY,
            owner text NOT NULL,
            replica text NOT NULL,
            backend_pid integer NOT NULL,
            expires_at timestamptz NOT NULL
        )""",
        "CREATE INDEX sw_owners_replica ON sw_owners (replica)",
    ),
    # Named users of `soulwire serve` (server/users.py) and their audit trail (server/audit.py).
    3: (
        """CREATE TABLE sw_users (
            name text PRIMARY KEY,
            role text NOT NULL CHECK (role IN ('admin', 'member', 'observer')),
            token_sha256 text NOT NULL UNIQUE,
            created double precision NOT NULL
        )""",
        """CREATE TABLE sw_audit (
            n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at double precision NOT NULL,
            user_name text NOT NULL,
            action text NOT NULL,
            session_id text NOT NULL,
            detail jsonb NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX sw_audit_session ON sw_audit (session_id, n)",
        "CREATE INDEX sw_audit_user ON sw_audit (user_name, n)",
    ),
    # What a session's clients get that is not its record (approval requests, their
    # resolution, role changes: GroupWriter.relay), for the replicas that follow it
    # (server/follow.py); each row lives a few minutes. `after_seq`: the record's seq it
    # came after.
    4: (
        """CREATE TABLE sw_live (
            n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL,
            after_seq bigint NOT NULL,
            at timestamptz NOT NULL DEFAULT now(),
            line text NOT NULL
        )""",
        "CREATE INDEX sw_live_session ON sw_live (session_id, n)",
        "CREATE INDEX sw_live_at ON sw_live (at)",
    ),
}


_DELETE_SESSION: tuple[LiteralString, ...] = (
    "DELETE FROM sw_context WHERE session_id = %s",
    "DELETE FROM sw_wire WHERE session_id = %s",
    "DELETE FROM sw_live WHERE session_id = %s",
    "DELETE FROM sw_checkpoints WHERE session_id = %s",
    "DELETE FROM sw_owners WHERE session_id = %s",
    "DELETE FROM sw_sessions WHERE id = %s",
)


class StoreError(SoulwireError):
    """The PostgreSQL store cannot be used; the message is one line for a person."""


class SchemaTooNewError(StoreError):
    """The database was migrated by a newer Soulwire."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class PostgresBackend:
    """A connection pool to one database; opens a store per session id."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10, timeout_s: float = 10.0) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        self.pool: ConnectionPool[Connection[tuple[Any, ...]]] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            open=False,
            reconnect_timeout=RECONNECT_GIVE_UP_S,
        )
        self._failing = False
        """The last connection could not be had (the database looks down)."""
        self.writer = GroupWriter(self.pool)
        """Every session's appends, committed together (one thread, started at the first)."""

    def open_pool(self, *, wait_s: float = 10.0) -> None:
        """Connect now; raise StoreError (one line) when the database cannot be reached. One
        direct connection first: it fails at once with libpq's reason (a wrong password, a
        refused port), where the pool would retry until its timeout and log each attempt."""
        import logging

        import psycopg
        from psycopg_pool import PoolTimeout

        logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())
        logging.getLogger("psycopg.pool").propagate = False  # its retries are not the user's news
        # A connection cut inside a pipelined write is the StoreUnavailable raised: psycopg's
        # warning that it could not also end the pipeline says it twice more.
        logging.getLogger("psycopg").addFilter(
            lambda record: not record.getMessage().startswith("error ignored terminating")
        )
        try:
            with psycopg.connect(self.url, connect_timeout=max(1, round(wait_s))):
                pass
            self.pool.open(wait=True, timeout=wait_s)
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(
                f"cannot connect to the session store at {redact(self.url)}: {_reason(exc)}"
            ) from exc

    def schema_version(self) -> int:
        """The database's schema version (0: no Soulwire schema yet)."""
        with self.pool.connection() as conn:
            exists = conn.execute("SELECT to_regclass('soulwire_schema') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                return 0
            row = conn.execute("SELECT max(version) FROM soulwire_schema").fetchone()
            return int(row[0]) if row and row[0] is not None else 0

    def migrate(self) -> int:
        """Create or upgrade the schema to SCHEMA_VERSION; returns the version before."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS soulwire_schema (version integer NOT NULL)")
            row = conn.execute("SELECT max(version) FROM soulwire_schema").fetchone()
            before = int(row[0]) if row and row[0] is not None else 0
            if before > SCHEMA_VERSION:
                raise SchemaTooNewError(
                    f"the session store's schema is version {before}, newer than this Soulwire knows "
                    f"({SCHEMA_VERSION}): upgrade Soulwire on this replica"
                )
            for version in range(before + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO soulwire_schema (version) VALUES (%s)", (version,))
            return before

    def check_schema(self) -> None:
        """Refuse a database this code cannot use (too new, or never migrated)."""
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"the session store's schema is version {version}, newer than this Soulwire knows "
                f"({SCHEMA_VERSION}): upgrade Soulwire on this replica"
            )
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"the session store's schema is version {version}, this Soulwire needs {SCHEMA_VERSION}: "
                "run `soulwire serve --store URL --migrate-only`"
            )

    @contextmanager
    def connection(self) -> Generator[Connection[tuple[Any, ...]]]:
        """A pooled connection; a database that cannot be reached (down, restarting, the
        connection cut) is a StoreUnavailable, nothing of the transaction written. Once one
        was, the next callers wait a second for a connection, not the pool's full timeout,
        until one gets through again."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection(timeout=_OUTAGE_WAIT_S if self._failing else None) as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            self._failing = True
            raise StoreUnavailable(f"the session store is unreachable: {_reason(exc)}") from exc
        self._failing = False

    def recheck(self) -> None:
        """The database is reachable again: drop the pool's connections the outage broke, and
        let callers wait for a new one as long as usual."""
        self.pool.check()
        self._failing = False

    def open(self, session_id: str | None = None, *, work_dir: str = "") -> PostgresSessionStore:
        return PostgresSessionStore(self, session_id or new_session_id(), work_dir=work_dir)

    def session_ids(self) -> list[str]:
        with self.pool.connection() as conn:
            return [str(r[0]) for r in conn.execute("SELECT id FROM sw_sessions ORDER BY updated_at DESC")]

    def close(self) -> None:
        self.writer.close()  # what is queued is committed first
        self.pool.close()


def connect_from_argv(url: str) -> PostgresBackend:
    """A migrated backend for a URL a person typed: one without a password (argv is visible to
    every user in `ps`; libpq reads PGPASSWORD, PGPASSFILE or ~/.pgpass instead)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise StoreError("a PostgreSQL store needs psycopg: pip install 'soulwire[postgres]'") from exc
    try:
        params = conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: say which part is wrong, not the text
        raise StoreError("the store URL is not a PostgreSQL connection string (postgresql://…)") from exc
    if params.get("password"):
        raise StoreError(
            "put the store's password in PGPASSWORD, PGPASSFILE or ~/.pgpass, not in the URL "
            "(a command line is visible to every user in `ps`)"
        )
    backend = PostgresBackend(url, max_size=2)
    backend.open_pool()
    try:
        backend.migrate()
    except BaseException:
        backend.close()
        raise
    return backend


def redact(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(url)
    except Exception:  # a malformed URL: say nothing of it but that it is one
        return "<an unreadable connection string>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def _reason(exc: BaseException) -> str:
    """The last line libpq gave (the specific reason), without the connection string."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    last = lines[-1] if lines else "the connection failed"
    return last.removeprefix("FATAL:").strip()


STREAMED_KINDS = frozenset({"ContentPart", "ToolCallPart"})
"""The wire messages of a model's stream (nearly every message of a turn): group-committed
without waiting; the message after them waits for all of them."""

_TOUCH_SESSION: LiteralString = (
    "INSERT INTO sw_sessions (id, work_dir) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET updated_at = now()"
)
"""The session's row made on its first write, its `updated_at` moved on every later one."""


class PostgresSessionStore:
    """One session's records in the shared database (see the module docstring)."""

    local_checkpoints = False  # (each checkpoint write is a round trip)

    def __init__(
        self, backend: PostgresBackend, session_id: str, *, work_dir: str = "", share: Path | None = None
    ) -> None:
        self.session_id = session_id
        self.work_dir = work_dir
        self._backend = backend
        self._writer = backend.writer
        self._next_seq: int | None = None
        self._live_generation: int | None = None
        """The live context's generation, known once read (this replica owns the session)."""
        # What stays on the host running the session (background tasks' output, sub-agents'
        # records, uploads): the file store's directory for it, under the host's share dir.
        self.share = share if share is not None else Path(tempfile.gettempdir()) / "soulwire-pg"
        self.dir = session_dir(self.share, work_dir or "/", session_id)
        self.existed = False
        """Set by `PostgresStores.open` (a query; the transfer tools do not need it)."""
        self.gate: CommitGate | None = None
        """Set by the live session's hub (`set_gate`): no append waits for its commit."""
        self._unraised: WriteFailed | None = None
        """A failure the gate took (`take_failure`) that the session's next call still raises
        (the turn it cut short stops; a new turn does not: its clients were told already)."""

    def ensure_dir(self) -> None:
        ensure_private_dir(self.dir)

    def sibling(self, session_id: str, work_dir: str) -> PostgresSessionStore:
        """Another session of the same database (a fork's), its local files under the same share."""
        return PostgresSessionStore(self._backend, session_id, work_dir=work_dir, share=self.share)

    def set_gate(self, gate: CommitGate) -> None:
        """Let a reader gate what it delivers on the commits (sessions/pg_gate.py; the live
        session's hub, server/hub.py): from then on no append waits for its commit — a wire
        message other than a streamed part, `save_state(wait=True)` and `wait_for_state`
        return at once, and the gate holds back what follows them until they are committed."""
        self.gate = gate
        self._writer.listen(self.session_id, gate.on_failing)

    def take_failure(self) -> None:
        """Take the writer's failure for this session now, if it has one (the gate is told;
        the session's next call still raises it)."""
        failure = self._writer.take_failure(self.session_id)
        if failure is not None:
            self._unraised = failure
            self._lost(failure)

    def _lost(self, failure: WriteFailed) -> None:
        self._forget()
        if self.gate is not None:
            self.gate.lose(failure)

    def _conn(self):
        """A connection for a read or a write of its own, once the queued appends are in."""
        self._settle()
        return self._backend.connection()

    def _settle(self) -> None:
        """Wait for this session's queued appends; after a failed one, start again from the
        database (raising the failure once)."""
        try:
            self._raise_taken()
            self._writer.settle(self.session_id)
        except WriteFailed as exc:
            if exc is not self._unraised:
                self._lost(exc)
            self._unraised = None
            raise

    def _submit(self, kind: str, row: tuple[Any, ...], seq: int = 0, text: str = "") -> None:
        try:
            self._raise_taken()
            after = None if self.gate is None else self.gate.next(seq, text)
            self._writer.submit(self.session_id, self.work_dir, kind, row, after)
        except WriteFailed as exc:
            if exc is not self._unraised:
                self._lost(exc)
            self._unraised = None
            raise

    def _raise_taken(self) -> None:
        if self._unraised is not None:
            raise self._unraised

    def _forget(self) -> None:
        self._next_seq = None
        self._live_generation = None

    def _ensure_session(self, conn: Connection[Any]) -> int:
        """The session's row (made on first write); returns the live context's generation."""
        row = conn.execute(
            _TOUCH_SESSION + " RETURNING generation",
            (self.session_id, self.work_dir),
        ).fetchone()
        assert row is not None  # RETURNING always yields the row
        return int(row[0])

    def _generation(self, conn: Connection[Any]) -> int:
        row = conn.execute("SELECT generation FROM sw_sessions WHERE id = %s", (self.session_id,)).fetchone()
        return int(row[0]) if row else 1

    # the protocol ----------------------------------------------------------
    def exists(self) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM sw_context WHERE session_id = %s)"
                " OR EXISTS (SELECT 1 FROM sw_wire WHERE session_id = %s)",
                (self.session_id, self.session_id),
            ).fetchone()
            return bool(row and row[0])

    def load_context(self) -> Iterator[dict[str, Any]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT c.record FROM sw_context c JOIN sw_sessions s ON s.id = c.session_id "
                "WHERE c.session_id = %s AND c.generation = s.generation ORDER BY c.n",
                (self.session_id,),
            ).fetchall()
        return (json.loads(r[0]) for r in rows)

    def append_context(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        if self._live_generation is None:  # only replace_context moves it, and it settles
            with self._backend.pool.connection() as conn:
                self._live_generation = self._generation(conn)
        for record in records:
            self._submit("context", (self.session_id, self._live_generation, _dumps(record)))

    def replace_context(self, records: list[dict[str, Any]]) -> None:
        with self._conn() as conn, conn.transaction():
            generation = self._ensure_session(conn)
            live = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM sw_context WHERE session_id = %s AND generation = %s)",
                (self.session_id, generation),
            ).fetchone()
            if live and live[0]:  # the live context becomes an archive, as the file store does
                generation += 1
                conn.execute(
                    "UPDATE sw_sessions SET generation = %s WHERE id = %s", (generation, self.session_id)
                )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO sw_context (session_id, generation, record) VALUES (%s, %s, %s)",
                    [(self.session_id, generation, _dumps(r)) for r in records],
                )
        self._live_generation = generation

    def archived_contexts(self) -> int:
        with self._conn() as conn:
            return self._generation(conn) - 1

    def load_archived_context(self, index: int) -> Iterator[dict[str, Any]]:
        with self._conn() as conn:
            if not 1 <= index < self._generation(conn):
                return iter(())
            rows = conn.execute(
                "SELECT record FROM sw_context WHERE session_id = %s AND generation = %s ORDER BY n",
                (self.session_id, index),
            ).fetchall()
        return (json.loads(r[0]) for r in rows)

    def record_wire(self, message: dict[str, Any]) -> None:
        self.record_wire_at(message)

    def record_wire_at(self, message: dict[str, Any], *, recorded_at: float | None = None) -> int:
        """Record one message; returns its `seq` (1-based, per session). A streamed part is
        queued for the next group commit (durable once the session settles: `sync`, a read,
        close, or its next message of another kind); any other message returns once it, and
        every part before it, is committed — so what a client acts on (a tool call, a turn's
        end, a step) is durable before the client can see it. Behind a `gate`, no message
        waits: the gate holds back what follows one until it is committed."""
        import time

        if message.get("type") == "TurnBegin":  # the lost turn's error was told; this one is new
            self._unraised = None
        if self._next_seq is None:
            with self._conn() as conn:
                row = conn.execute(
                    "SELECT coalesce(max(seq), 0) FROM sw_wire WHERE session_id = %s", (self.session_id,)
                ).fetchone()
            self._next_seq = (int(row[0]) if row else 0) + 1
        seq = self._next_seq
        at = time.time() if recorded_at is None else recorded_at
        kind = str(message.get("type", ""))
        text = _dumps(message)
        self._submit("wire", (self.session_id, seq, kind, at, text), seq, text)
        self._next_seq = seq + 1
        if kind not in STREAMED_KINDS and self.gate is None:  # (a gate waits for it instead)
            self._settle()
        return seq

    def wire_records(self) -> Iterator[dict[str, Any]]:
        return (message for message, _ in self.wire_records_verbatim())

    def wire_records_verbatim(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        return ((json.loads(text), text.encode("utf-8")) for _, text in self.wire_rows())

    def wire_rows(self, since_seq: int = 0) -> list[tuple[int, str]]:
        """(seq, message text) of the messages after `since_seq`, in order."""
        with self._conn() as conn:
            rows = conn.execute(WIRE_ROWS_AFTER, (self.session_id, since_seq)).fetchall()
        return [(int(seq), str(text)) for seq, text in rows]

    def recent_wire_rows(self, limit: int) -> tuple[list[tuple[int, str]], int]:
        """The newest `limit` messages (seq, text) in order, and the last seq (0: none)."""
        with self._conn() as conn:
            rows = conn.execute(RECENT_WIRE_ROWS, (self.session_id, self.session_id, limit)).fetchall()
            last = conn.execute(LAST_SEQ, (self.session_id,)).fetchone()
        return [(int(seq), str(text)) for seq, text in rows], int(last[0]) if last else 0

    def has_wire_records(self) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM sw_wire WHERE session_id = %s)", (self.session_id,)
            ).fetchone()
            return bool(row and row[0])

    def has_open_turn(self) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT kind FROM sw_wire WHERE session_id = %s AND kind IN ('TurnBegin', 'TurnEnd') "
                "ORDER BY seq DESC LIMIT 1",
                (self.session_id,),
            ).fetchone()
        return bool(row and row[0] == "TurnBegin")

    def load_state(self) -> dict[str, Any]:
        with self._conn() as conn:
            row = conn.execute("SELECT state FROM sw_sessions WHERE id = %s", (self.session_id,)).fetchone()
        value = row[0] if row else None
        return cast(dict[str, Any], value) if isinstance(value, dict) else {}

    def save_state(self, state: dict[str, Any], *, wait: bool = True) -> None:
        self._submit("state", (_dumps(state),))  # the text now: `state` may change after the call
        if wait and self.gate is None:
            self._settle()

    def wait_for_state(self) -> None:
        if self.gate is None:
            self._settle()

    # checkpoints of the workspace: content-addressed objects (shared by all sessions)
    def put_objects(self, objects: Mapping[str, bytes]) -> None:
        if not objects:
            return
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO sw_objects (digest, data) VALUES (%s, %s) ON CONFLICT (digest) DO NOTHING",
                list(objects.items()),
            )

    def get_object(self, digest: str) -> bytes | None:
        with self._conn() as conn:
            row = conn.execute("SELECT data FROM sw_objects WHERE digest = %s", (digest,)).fetchone()
        return bytes(row[0]) if row else None

    def has_object(self, digest: str) -> bool:
        with self._conn() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM sw_objects WHERE digest = %s)", (digest,)
            ).fetchone()
        return bool(row and row[0])

    def append_checkpoint(self, record: dict[str, Any]) -> None:
        with self._conn() as conn, conn.transaction():
            self._ensure_session(conn)
            conn.execute(
                "INSERT INTO sw_checkpoints (session_id, record) VALUES (%s, %s)",
                (self.session_id, _dumps(record)),
            )

    def checkpoint_records(self) -> Iterator[dict[str, Any]]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT record FROM sw_checkpoints WHERE session_id = %s ORDER BY n", (self.session_id,)
            ).fetchall()
        return (json.loads(r[0]) for r in rows)

    def truncate_history(self, context_records: int, wire_messages: int) -> None:
        """Keep the first `context_records` live context records and `wire_messages` wire
        messages, in one transaction (a rewind of the conversation)."""
        with self._conn() as conn, conn.transaction():
            generation = self._ensure_session(conn)
            conn.execute(
                "DELETE FROM sw_context WHERE session_id = %s AND generation = %s AND n NOT IN ("
                " SELECT n FROM sw_context WHERE session_id = %s AND generation = %s ORDER BY n LIMIT %s)",
                (self.session_id, generation, self.session_id, generation, context_records),
            )
            conn.execute(
                "DELETE FROM sw_wire WHERE session_id = %s AND seq > %s", (self.session_id, wire_messages)
            )
            # The replicas that follow the session learn that its record was cut (they find
            # the seq they had gone, and start again from the store: server/follow.py).
            conn.execute(
                "SELECT pg_notify('" + WIRE_CHANNEL + "', %s)", (f"{self.session_id}:{wire_messages}",)
            )
        self._next_seq = None

    # lifecycle --------------------------------------------------------------
    def sync(self) -> None:
        """Return once everything appended is committed (the group commit's barrier)."""
        self._settle()

    def close(self) -> None:
        try:
            self._settle()
        finally:
            self._forget()
            if self.gate is not None:
                self._writer.listen(self.session_id, None)

    def delete(self) -> None:
        with self._conn() as conn, conn.transaction():
            for statement in _DELETE_SESSION:
                conn.execute(statement, (self.session_id,))
        self._forget()


__all__ = [
    "LIVE_CHANNEL",
    "SCHEMA_VERSION",
    "WIRE_CHANNEL",
    "PostgresBackend",
    "PostgresSessionStore",
    "SchemaTooNewError",
    "StoreError",
    "WriteFailed",
    "connect_from_argv",
    "redact",
]
