"""Observers of sessions another replica runs: live through the shared store.

A replica that does not run a session can still serve its observers. Committed wire messages
are announced on the `sw_wire` channel (`NOTIFY`, payload `SESSION:SEQ`: the session's last seq
in a group commit's transaction, sessions/pg_writer.py); this replica `LISTEN`s on one
connection and, for a session it follows, reads the rows after the last `seq` it has from the
table — so a lost or coalesced notification costs nothing but a later read, and the messages arrive in the
store's order, each once. They are numbered by their `seq` in a ring exactly as the owner's
hub numbers them (`STORE_EPOCH`), so a client may move between replicas with `since_seq`.

What the owner's clients get beyond the record (requests to the client with their deadline,
`request/resolved`, `role/changed`, `approvals/rules/changed`, the engine's unrecorded events)
comes through `sw_live` (sessions/pg_writer.py, `GroupWriter.relay`), each line with the
record's seq it followed there: it is delivered after that seq here too, so an observer sees
the stream an observer of the owner sees, in the same order. A rewind cuts the record and
its later messages reuse seqs: the row this replica read last is then gone or another, and
the session is followed again from the store, its readers closed to re-attach and reload
(as the owner's are).

Only observers attach here: a follower has no engine, so whatever would drive the session is
answered with an error naming the replica that runs it (clients that drive it go there)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, LiteralString

import anyio
import anyio.abc

from soulwire.server.client import Client
from soulwire.server.hub import forbidden
from soulwire.server.messages import AttachParams, HubSettings, ServeOptions, validated
from soulwire.server.protocol import AttachResult, Loaded, ServeInfo, params_of
from soulwire.server.record_stream import (
    REWRITTEN,
    STORE_EPOCH,
    backlog,
    new_ring,
    recorded_line,
    renumbered,
)
from soulwire.server.ring import EVENT_PARAMS
from soulwire.wire import PROTOCOL_VERSION, jsonrpc
from soulwire.wire.jsonrpc import INVALID_STATE, RPCError, error_line, response_line

if TYPE_CHECKING:
    from psycopg import AsyncConnection

log = logging.getLogger("soulwire.server")
LISTEN_WAIT_S = 10.0
"""How long a first observer waits for this replica's LISTEN connection (then: 503)."""
RECONNECT_S = 1.0
"""Pause before listening again after the store's connection broke (then every follower
reads what it missed)."""


_Row = tuple[int, str, float]
"""seq, message text, when it was recorded"""
_ROWS_FROM: LiteralString = (
    "SELECT seq, message, recorded_at FROM sw_wire WHERE session_id = %s AND seq >= %s ORDER BY seq"
)
_RECENT_ROWS: LiteralString = (
    "SELECT seq, message, recorded_at FROM sw_wire WHERE session_id = %s AND seq > ("
    " SELECT coalesce(max(seq), 0) FROM sw_wire WHERE session_id = %s) - %s ORDER BY seq"
)


class FollowedSession:
    """A session run by another replica, as this replica's observers see it."""

    def __init__(
        self,
        session_id: str,
        work_dir: str,
        settings: HubSettings,
        owner: str | None,
        on_empty: Callable[[FollowedSession], None],
    ) -> None:
        self.id = session_id
        self.work_dir = work_dir
        self.owner = owner
        """The replica that runs the session, as of the last observer's attach (None: nobody)."""
        self.settings = settings
        self.epoch = STORE_EPOCH
        self.ring = new_ring(settings)
        self.clients: dict[int, Client] = {}
        self.closed = False
        self.due = anyio.Event()
        """Set when the store may have rows past `seq` (a notification, a reconnect)."""
        self.ready = anyio.Event()
        """Set once the newest records are in the ring (observers attach after it)."""
        self.loaded: dict[str, Any] = {"session_id": session_id}
        self._on_empty = on_empty
        self.opened_at = 0
        """The store's last seq when this replica began to follow (see record_stream.backlog)."""
        self.last_at = 0.0
        """When the row numbered `seq` was recorded: that row gone or another in its place
        means the record was rewound (see `Followers._read`)."""
        self.live_n = 0
        """The last row of `sw_live` read (what the owner's clients got unrecorded)."""
        self._held: list[tuple[int, bytes]] = []
        """Unrecorded lines (after which seq, line) read before the record they follow."""

    @property
    def seq(self) -> int:
        return self.ring.seq

    def take(
        self, rows: list[_Row], lives: Sequence[tuple[int, int, str]] = (), *, flush: bool = False
    ) -> None:
        """Rows read from the store after `seq`, in order, and the unrecorded lines read with
        them (`sw_live`: n, after which seq, line): numbered and fanned out, each line after
        the record it followed on the owner (a line whose record is not read yet waits, unless
        `flush`)."""
        held = self._held + [(after, line.encode() + b"\n") for _, after, line in lives]
        self._held = []
        for seq, text, at in rows:
            while held and held[0][0] < seq:
                self._deliver_live(held.pop(0)[1])
            self.ring = renumbered(self.ring, seq, self.settings, self.clients.values())
            self.ring.add(recorded_line(seq, text))
            self.last_at = at
            plain = [c for c in self.clients.values() if c.ring is None]
            if plain:
                line = EVENT_PARAMS[:-1] + text.encode() + b"}\n"
                for client in plain:
                    client.deliver(line)
        while held and (flush or held[0][0] <= self.seq):
            self._deliver_live(held.pop(0)[1])
        self._held = held
        if lives:
            self.live_n = lives[-1][0]
        for client in self.ring.readers:
            if client.last_sent < self.ring.seq:
                client.wake()

    @property
    def waiting(self) -> bool:
        """Unrecorded lines wait for records not read yet."""
        return bool(self._held)

    def _deliver_live(self, line: bytes) -> None:
        """An unrecorded line, to the clients of the extensions (as the owner's got it)."""
        for client in self.clients.values():
            if client.ring is not None:
                client.deliver(line)

    def restart(self, rows: list[_Row]) -> None:
        """The record was rewound (its later seqs reused): the newest rows start a new ring,
        and the clients reading the old one re-attach (as the owner's do: a rewritten record
        is reloaded)."""
        for client in self.clients.values():
            if client.ring is self.ring:
                client.close(*REWRITTEN)
        self.ring = new_ring(self.settings)
        self.ring.start_after(rows[0][0] - 1 if rows else 0)
        self._held = []
        self._regroup()
        self.take(rows)

    # -- clients (the subset of LiveSession's that server/app.py uses) -----------------
    def attach(self, client: Client, params: AttachParams) -> dict[str, Any]:
        if params.mode == "controller":
            raise _refusal(self, client, "controlling the session")
        is_new = client.number not in self.clients
        if is_new or client.ring is None:
            client.last_sent = self.seq
        client.mode = "observer"
        client.extended = True
        self.clients[client.number] = client
        _, complete, sent = backlog(
            self.ring, self.epoch, params, client, is_new=is_new, opened_at=self.opened_at
        )
        self._regroup()
        result = AttachResult(
            session_id=self.id,
            epoch=self.epoch,
            mode="observer",
            last_seq=self.seq,
            complete=complete,
            sent=sent,
            pending=[],
            loaded=Loaded.model_validate(self.loaded),
        )
        return params_of(result)

    def connect(self, client: Client) -> None:
        """A client of today's Wire: copies of the events from now on."""
        client.last_sent = self.seq
        client.mode = "observer"
        self.clients[client.number] = client

    def detach(self, client: Client) -> None:
        self.clients.pop(client.number, None)
        self._regroup()
        if not self.clients:  # nobody watches: stop reading (a new observer starts again)
            self.closed = True
            self.due.set()
            self._on_empty(self)

    def _regroup(self) -> None:
        self.ring.readers = tuple(c for c in self.clients.values() if c.ring is not None)

    def handle(self, client: Client, text: str | bytes) -> None:
        inbound = jsonrpc.classify(text)
        if inbound.kind == "invalid":
            assert inbound.error is not None
            client.deliver(error_line(None, inbound.error))
        elif inbound.kind == "request":
            try:
                client.deliver(
                    response_line(inbound.id, self._answer(client, str(inbound.method), inbound.params))
                )
            except RPCError as error:
                client.deliver(error_line(inbound.id, error))

    def _answer(self, client: Client, method: str, params: Any) -> Any:
        if method == "attach":
            return self.attach(client, validated(method, AttachParams, params))
        if method == "initialize":
            serve = params.get("serve") if isinstance(params, dict) else None
            if serve is not None:
                self._negotiate(client, validated(method, ServeOptions, serve))
            answer: dict[str, Any] = {
                "protocol_version": PROTOCOL_VERSION,
                "session": {"id": self.id, "work_dir": self.work_dir},
            }
            if client.extended:
                answer["serve"] = self._serve_info(client)
            return answer
        raise _refusal(self, client, method)

    def _negotiate(self, client: Client, options: ServeOptions) -> None:
        if options.seq and client.ring is None:
            client.extended = True
            client.read_ring(self.ring, self.seq)
            self._regroup()
        if options.max_message_bytes is not None:
            client.max_message_bytes = options.max_message_bytes
        client.batch = client.batch or options.batch
        if options.mode == "controller":
            raise _refusal(self, client, "controlling the session")
        if options.since_seq is not None:
            self.attach(client, AttachParams(since_seq=options.since_seq, mode="observer"))

    def _serve_info(self, client: Client) -> dict[str, Any]:
        info = ServeInfo(
            epoch=self.epoch,
            last_seq=self.seq,
            mode="observer",
            deadline_ms=self.settings.deadline_ms,
            on_timeout=self.settings.on_timeout,
            methods=["attach", "initialize"],
            max_message_bytes=client.max_message_bytes,
            batch=client.batch,
            receipts=False,
            loaded=Loaded.model_validate(self.loaded),
        )
        return params_of(info)


def _refusal(followed: FollowedSession, client: Client, action: str) -> RPCError:
    """What a follower answers to anything but watching: an observer user's refusal, or where
    the session is driven."""
    if client.read_only and client.user is not None:
        return forbidden(client.user, action)
    where = f" at {followed.owner}" if followed.owner else ""
    return RPCError(
        INVALID_STATE,
        f"{action} is done on the replica that runs the session{where}; this one only observes it",
        {"reason": "observer", "owner": followed.owner},
    )


async def _when_ready(followed: FollowedSession) -> FollowedSession:
    await followed.ready.wait()
    if followed.closed:  # its first read failed
        raise ConnectionError("the session store could not be read")
    return followed


class Followers:
    """The sessions this replica follows, and the one connection that hears of new rows."""

    def __init__(self, url: str, settings: HubSettings, group: anyio.abc.TaskGroup) -> None:
        self.url = url
        self.settings = settings
        self.sessions: dict[str, FollowedSession] = {}
        self._group = group
        self._started = False
        self._listening = anyio.Event()
        self._reader: AsyncConnection[tuple[Any, ...]] | None = None
        self._read_lock = anyio.Lock()

    async def follow(self, session_id: str, work_dir: str, owner: str | None) -> FollowedSession:
        """The followed session (its newest records read now), listening from here on."""
        followed = self.sessions.get(session_id)
        if followed is not None and not followed.closed:
            followed.owner = owner
            return await _when_ready(followed)
        if not self._started:
            self._started = True
            self._group.start_soon(self._listen)
        with anyio.fail_after(LISTEN_WAIT_S):  # so that no row is committed unheard after the read
            await self._listening.wait()
        followed = self.sessions.get(session_id)
        if followed is not None:
            return await _when_ready(followed)
        followed = FollowedSession(session_id, work_dir, self.settings, owner, self._forget)
        self.sessions[session_id] = followed  # (observers arriving meanwhile wait for `ready`)
        from soulwire.sessions.postgres import LAST_LIVE_ROW

        try:
            async with self._read_lock:
                reader = await self._connection()
                rows = await self._recent(reader, session_id)
                live = await (await reader.execute(LAST_LIVE_ROW, (session_id,))).fetchone()
        except BaseException:
            self._forget(followed)
            followed.closed = True
            followed.ready.set()
            raise
        # Unrecorded lines from now on: those before the rows read came before this replica
        # followed the session (an observer of the owner attaching now does not get them).
        followed.live_n = int(live[0]) if live else 0
        followed.opened_at = rows[-1][0] if rows else 0
        followed.loaded["records"] = followed.opened_at  # (the web UI draws those from the record)
        followed.ring.start_after(rows[0][0] - 1 if rows else 0)
        followed.take(rows)
        self._group.start_soon(self._follow, followed)
        followed.ready.set()
        return followed

    async def _recent(self, reader: AsyncConnection[tuple[Any, ...]], session_id: str) -> list[_Row]:
        """The session's newest rows (as many as a ring keeps)."""
        limit = self.settings.ring_events
        cursor = await reader.execute(_RECENT_ROWS, (session_id, session_id, limit))
        return [(int(seq), str(text), float(at)) for seq, text, at in await cursor.fetchall()]

    def _forget(self, followed: FollowedSession) -> None:
        if self.sessions.get(followed.id) is followed:
            del self.sessions[followed.id]

    async def aclose(self) -> None:
        for followed in list(self.sessions.values()):
            followed.closed = True
            followed.due.set()
        if self._reader is not None:
            await self._reader.close()

    async def _connection(self) -> AsyncConnection[tuple[Any, ...]]:
        import psycopg

        if self._reader is None or self._reader.closed or self._reader.broken:
            self._reader = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        return self._reader

    async def _follow(self, followed: FollowedSession) -> None:
        """Read the rows past the session's last `seq` whenever some may have come."""
        while not followed.closed:
            await followed.due.wait()
            followed.due = anyio.Event()
            if followed.closed:
                return
            try:
                async with self._read_lock:
                    await self._read(followed, await self._connection())
            except Exception as exc:  # psycopg's: the store is unreachable for now
                log.warning("following session %s: %s", followed.id, type(exc).__name__)
                await anyio.sleep(RECONNECT_S)
                followed.due.set()  # (read again: nothing is skipped)

    async def _read(self, followed: FollowedSession, reader: AsyncConnection[tuple[Any, ...]]) -> None:
        """What is new: the rows from the last one read on (that one again, to tell a rewound
        record: it is gone or another row has its seq), then the unrecorded lines — in this
        order: a line is committed no later than the records after it (GroupWriter.relay),
        so every line that came before a record read here is read too."""
        from soulwire.sessions.postgres import LIVE_ROWS_AFTER

        cursor = await reader.execute(_ROWS_FROM, (followed.id, followed.seq))
        rows: list[_Row] = [(int(seq), str(text), float(at)) for seq, text, at in await cursor.fetchall()]
        found = await (await reader.execute(LIVE_ROWS_AFTER, (followed.id, followed.live_n))).fetchall()
        lives = [(int(n), int(after), str(line)) for n, after, line in found]
        if followed.seq:
            if not rows or rows[0][0] != followed.seq or rows[0][2] != followed.last_at:
                log.info("session %s: its record was rewound; following it again", followed.id)
                followed.restart(await self._recent(reader, followed.id))
                followed.take([], lives, flush=True)
                return
            rows = rows[1:]
        stalled = followed.waiting and not rows  # (a second read found nothing they follow)
        followed.take(rows, lives, flush=stalled)
        if followed.waiting:
            followed.due.set()  # the records they follow were committed after the read: again

    async def _listen(self) -> None:
        import psycopg

        from soulwire.sessions.postgres import LIVE_CHANNEL, WIRE_CHANNEL

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {WIRE_CHANNEL}")
                    await conn.execute(f"LISTEN {LIVE_CHANNEL}")
                    self._listening.set()
                    for followed in self.sessions.values():  # what came while nobody listened
                        followed.due.set()
                    async for note in conn.notifies():
                        # `SESSION:SEQ` (new rows up to SEQ, or the record cut back to SEQ: a
                        # rewind), or `SESSION` (unrecorded lines): read what is new
                        session_id = note.payload.partition(":")[0]
                        followed = self.sessions.get(session_id)
                        if followed is not None:
                            followed.due.set()
            except psycopg.Error as exc:
                log.warning("listening for new records: %s", type(exc).__name__)
            await anyio.sleep(RECONNECT_S)


__all__ = ["FollowedSession", "Followers"]
