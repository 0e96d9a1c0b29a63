"""Group commit for the PostgreSQL store: one writer thread per replica (per `PostgresBackend`)
that writes the appends of every session it serves in one transaction per batch.

A store hands its wire messages, context records and state to `GroupWriter.submit` and goes on
(the replica owns the session, so the wire `seq` is the store's to give at once); the writer
takes whatever queued while the last batch committed, writes it with `COPY` and two array
statements, and commits. An append is durable when its batch has committed: `settle` waits for
that (a session's reads, its `sync`, its other writes and its close all settle first, so a
session always reads what it wrote, and in order). Batches are written in submission order, so
each session's records keep theirs.

A batch that fails is retried one session at a time, so one session's fault (a second writer on
its `seq`) does not cost the others their records; a lost connection fails every session in the
batch. A failed session's next call raises `WriteFailed` once (nothing of the failed batch was
kept: each session's part of a batch is one transaction, and what it queued after that batch
is dropped with it, so its record never has a gap), and its store starts again from what the
database holds. A session's listener (`listen`) is told of the failure at once, from the
writer's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soulwire.errors import SoulwireError
from soulwire.sessions.store import StoreUnavailable

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool


WIRE_CHANNEL = "sw_wire"
"""The NOTIFY channel on which committed wire messages are announced as `SESSION:SEQ` (the
session's last seq in the batch; server/follow.py reads the rows up to it)."""

LIVE_CHANNEL = "sw_live"
"""The NOTIFY channel of new `sw_live` rows (payload: the session's id, once a batch)."""
LIVE_ROWS_S = 600
"""How long a row of `sw_live` is kept (a follower reads it within moments)."""
_PRUNE_EVERY_S = 60.0

_FORGET_AFTER = 4096
"""Sessions remembered before the settled ones are dropped from the bookkeeping."""


class WriteFailed(SoulwireError):
    """A session's appends could not be committed (the message is one line for a person)."""


class WriteUnreachable(WriteFailed, StoreUnavailable):
    """Appends not committed because the database could not be reached (a server refuses
    prompts until it is back)."""


_WireRow = tuple[str, int, str, float, str]
"""session id, seq, kind, recorded at, message text"""
_ContextRow = tuple[str, int, str]
"""session id, generation, record text"""
_LiveRow = tuple[str, int, str]
"""session id, the record's seq it came after, line (server/follow.py)"""


@dataclass
class _Batch:
    """What one transaction writes (in the order it was submitted)."""

    sessions: dict[str, str] = field(default_factory=dict[str, str])
    """session id → its work dir: the rows made or touched (`updated_at`)."""
    wire: list[_WireRow] = field(default_factory=list[_WireRow])
    context: list[_ContextRow] = field(default_factory=list[_ContextRow])
    states: dict[str, str] = field(default_factory=dict[str, str])
    """session id → the JSON text of its last state in the batch."""
    live: list[_LiveRow] = field(default_factory=list[_LiveRow])
    """What the sessions' clients got unrecorded (`GroupWriter.relay`)."""

    def add(self, session_id: str, work_dir: str, kind: str, row: tuple[Any, ...]) -> None:
        if kind == "live":  # (no session row made or touched for it)
            self.live.append(row)
            return
        self.sessions.setdefault(session_id, work_dir)
        if kind == "wire":
            self.wire.append(row)  # the store builds each kind's row
        elif kind == "context":
            self.context.append(row)
        else:
            self.states[session_id] = row[0]

    def only(self, session_id: str) -> _Batch:
        """This batch's part for one session."""
        return _Batch(
            {session_id: self.sessions[session_id]},
            [r for r in self.wire if r[0] == session_id],
            [r for r in self.context if r[0] == session_id],
            {k: v for k, v in self.states.items() if k == session_id},
            [r for r in self.live if r[0] == session_id],
        )


_Submission = tuple[str, str, str, tuple[Any, ...], Callable[[], None] | None]
"""session id, work dir, kind, row, what to call once it is committed"""


class GroupWriter:
    """The replica's one writer of appends (see the module docstring)."""

    def __init__(self, pool: ConnectionPool[Connection[tuple[Any, ...]]]) -> None:
        self._pool = pool
        self._cond = threading.Condition()
        self._queue: list[_Submission] = []
        self._submitted = 0
        self._done = 0
        """Every submission numbered up to here is committed or failed."""
        self._last: dict[str, int] = {}
        """Each session's last submission (what its `settle` waits for)."""
        self._failed: dict[str, BaseException] = {}
        self._listeners: dict[str, Callable[[], None]] = {}
        """Told (from the writer's thread) when a session's appends failed (`listen`)."""
        self._thread: threading.Thread | None = None
        self._closing = False
        self.batches = 0
        """Transactions committed."""
        self._pruned = 0.0

    def submit(
        self,
        session_id: str,
        work_dir: str,
        kind: str,
        row: tuple[Any, ...],
        after: Callable[[], None] | None = None,
    ) -> int:
        """Queue one append (`kind`: wire, context or state); returns its number. `after` is
        called from the writer's thread once the append is committed (in submission order;
        never for one that failed)."""
        with self._cond:
            self._raise_failure(session_id)
            if self._closing:
                raise WriteFailed("the session store is closed")
            self._submitted += 1
            self._queue.append((session_id, work_dir, kind, row, after))
            self._last[session_id] = self._submitted
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="soulwire-pg-writer", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return self._submitted

    def relay(self, session_id: str, after_seq: int, line: bytes) -> None:
        """Queue a line a session's clients got unrecorded, after its record's `after_seq`,
        for the replicas that follow it (`sw_live`, server/follow.py). Committed with the next
        batch, in submission order: never after a record submitted later, so a follower that
        has read a record finds every line that came before it. Nothing waits for it; it is
        dropped when its batch fails or the writer is closing (it is not the record)."""
        with self._cond:
            if self._closing:
                return
            self._submitted += 1
            text = line.decode("utf-8", "replace").rstrip("\n")
            self._queue.append((session_id, "", "live", (session_id, after_seq, text), None))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="soulwire-pg-writer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def settle(self, session_id: str) -> None:
        """Return once every append of the session submitted so far is committed; raise
        WriteFailed (once) when some could not be."""
        with self._cond:
            last = self._last.get(session_id, 0)
            while self._done < last:
                self._cond.wait()
            self._raise_failure(session_id)

    def take_failure(self, session_id: str) -> WriteFailed | None:
        """The session's failed appends as the error its next call would raise, consumed here
        (None: none failed)."""
        with self._cond:
            try:
                self._raise_failure(session_id)
            except WriteFailed as exc:
                return exc
            return None

    def listen(self, session_id: str, on_failure: Callable[[], None] | None) -> None:
        """Call `on_failure` (from the writer's thread) when the session's appends fail; None
        stops."""
        with self._cond:
            if on_failure is None:
                self._listeners.pop(session_id, None)
            else:
                self._listeners[session_id] = on_failure

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _raise_failure(self, session_id: str) -> None:
        failure = self._failed.pop(session_id, None)
        if failure is not None:
            # What the session queued after the failed batch goes with it (it would leave a gap).
            self._queue = [q for q in self._queue if q[0] != session_id]
            reason = _line(failure)
            import psycopg
            from psycopg_pool import PoolTimeout

            message = f"the session store could not record session {session_id}: {reason}"
            if isinstance(failure, psycopg.OperationalError | PoolTimeout):  # the database is down
                raise WriteUnreachable(f"the session store is unreachable: {message}") from failure
            raise WriteFailed(message) from failure

    # the writer's thread --------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:  # closing, and nothing left
                    return
                queued, self._queue = self._queue, []
                if self._failed:  # queued after a failed batch, before the session heard: dropped
                    queued = [q for q in queued if q[0] not in self._failed]
                last = self._submitted
            batch = _Batch()
            for session_id, work_dir, kind, row, _ in queued:
                batch.add(session_id, work_dir, kind, row)
            failed = self._write(batch) if queued else {}
            for session_id, _, _, _, after in queued:
                if after is not None and session_id not in failed:
                    after()  # before the waiters wake: a settled message has been announced
            with self._cond:
                self._failed.update(failed)
                listeners = [self._listeners.get(session_id) for session_id in failed]
                self._done = last
                if len(self._last) > _FORGET_AFTER:  # sessions with nothing pending
                    self._last = {k: v for k, v in self._last.items() if v > last}
                self._cond.notify_all()
            for listener in listeners:
                if listener is not None:
                    try:
                        listener()
                    except Exception:  # (a session closing): the writer goes on for the others
                        pass

    def _write(self, batch: _Batch) -> dict[str, BaseException]:
        """Commit the batch; returns the sessions whose part could not be committed."""
        import psycopg

        try:
            self._commit(batch)
            self.batches += 1
            return {}
        except psycopg.OperationalError as exc:  # the connection: no session's part can go
            return dict.fromkeys(batch.sessions, exc)
        except Exception as exc:  # one session's fault (a stale seq): find whose
            if len(batch.sessions) <= 1:
                return dict.fromkeys(batch.sessions, exc)
        failed: dict[str, BaseException] = {}
        for session_id in batch.sessions:
            try:
                self._commit(batch.only(session_id))
                self.batches += 1
            except Exception as exc:
                failed[session_id] = exc
        return failed

    def _commit(self, batch: _Batch) -> None:
        ids = sorted(batch.sessions)  # one lock order for every writer
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "INSERT INTO sw_sessions (id, work_dir) SELECT * FROM unnest(%s::text[], %s::text[])"
                " ON CONFLICT (id) DO UPDATE SET updated_at = now()",
                (ids, [batch.sessions[i] for i in ids]),
            )
            if batch.wire:
                columns = "session_id, seq, kind, recorded_at, message"
                with cur.copy("COPY sw_wire (" + columns + ") FROM STDIN") as copy:
                    for row in batch.wire:
                        copy.write_row(row)
                # Observers on other replicas (server/follow.py) read each session's rows up
                # to its last seq when the commit is announced: one notice a session a batch.
                last = {row[0]: row[1] for row in batch.wire}
                cur.execute(
                    "SELECT pg_notify('" + WIRE_CHANNEL + "', n) FROM unnest(%s::text[]) AS n",
                    ([f"{sid}:{seq}" for sid, seq in last.items()],),
                )
            if batch.context:
                with cur.copy("COPY sw_context (session_id, generation, record) FROM STDIN") as copy:
                    for row in batch.context:
                        copy.write_row(row)
            if batch.live:
                self._write_live(cur, batch.live)
            if batch.states:
                cur.execute(
                    "UPDATE sw_sessions s SET state = v.state::jsonb"
                    " FROM unnest(%s::text[], %s::text[]) AS v(id, state) WHERE s.id = v.id",
                    (list(batch.states), list(batch.states.values())),
                )

    def _write_live(self, cur: Any, rows: list[_LiveRow]) -> None:
        """The batch's unrecorded lines, announced once a session; the rows older than
        `LIVE_ROWS_S` go now and then."""
        import time

        cur.execute(
            "INSERT INTO sw_live (session_id, after_seq, line)"
            " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[])",
            ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
        )
        cur.execute(
            "SELECT pg_notify('" + LIVE_CHANNEL + "', s) FROM unnest(%s::text[]) AS s",
            (list(dict.fromkeys(r[0] for r in rows)),),
        )
        if time.monotonic() - self._pruned > _PRUNE_EVERY_S:
            self._pruned = time.monotonic()
            cur.execute("DELETE FROM sw_live WHERE at < now() - make_interval(secs => %s)", (LIVE_ROWS_S,))


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


__all__ = ["LIVE_CHANNEL", "LIVE_ROWS_S", "WIRE_CHANNEL", "GroupWriter", "WriteFailed"]
