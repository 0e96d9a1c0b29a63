"""A session's numbered stream as its clients read it, where a shared store numbers it.

On a shared store (`serve --store postgresql://…`) the messages clients get with a `seq` are
the session's record, under the store's `seq`: the same on every replica and across restarts
(`STORE_EPOCH`), so a client re-attaches anywhere from its last `seq`. The replica that runs the
session numbers each record as it is committed (server/hub.py); the others read the rows the
store announces (server/follow.py). Both keep them in a ring (server/ring.py) and attach clients
with `backlog`, which the per-run numbering of the file store uses as well."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from soulwire.server.answers import by_reference
from soulwire.server.client import Client
from soulwire.server.messages import AttachParams, HubSettings
from soulwire.server.ring import EVENT_PARAMS, Ring
from soulwire.wire.messages import REQUEST_TYPES

STORE_EPOCH = "store"
"""The `epoch` of a session on a shared store: its messages are numbered by the store's `seq`,
the same on every replica and across restarts."""


def backlog(
    ring: Ring, epoch: str, params: AttachParams, client: Client, *, is_new: bool, opened_at: int = 0
) -> tuple[int, bool, int]:
    """Where an attaching client reads the ring from: (after which seq, whether that is exactly
    what it missed, how many it gets); the client is set to read from there. `opened_at`: the
    seq this process's numbering of the session continued from (a shared store's record): a
    client that does not name the epoch gets what came since, as from a new run."""
    complete = True
    sent = 0
    start = client.last_sent
    if params.since_seq is not None:
        if params.epoch is not None and params.epoch != epoch:
            complete = False  # another run of the session numbered those events
        if is_new:
            start = params.since_seq  # (on a live connection nothing sent is resent)
            if params.epoch is None:
                start = max(start, opened_at)
        if params.since_seq > ring.seq or (start + 1 < ring.oldest and start < ring.seq):
            complete = False  # the gap left the ring (or never was): reload the history
        if complete:
            sent = ring.seq - start
        else:
            start = ring.seq
    if client.ring is None or start != client.last_sent:
        client.read_ring(ring, start)  # a backlog is read at the connection's pace
    return start, complete, sent


def new_ring(settings: HubSettings) -> Ring:
    return Ring(
        settings.ring_events,
        settings.ring_bytes,
        large=min(settings.max_message_bytes, 1 << 16),  # the least a client may negotiate
        referencer=functools.partial(by_reference, settings.blobs),
    )


def renumbered(ring: Ring, seq: int, settings: HubSettings, clients: Iterable[Client]) -> Ring:
    """The ring in which `seq` comes next: this one, or a new one when a rewind renumbered the
    record (its readers are closed: they re-attach and reload the history)."""
    if seq == ring.seq + 1:
        return ring
    fresh = new_ring(settings)
    fresh.start_after(seq - 1)
    for client in clients:
        if client.ring is ring:
            client.close(*REWRITTEN)
    return fresh


REWRITTEN = (1012, "the session's record was rewritten: re-attach")
"""How the connections reading a session's numbered stream close when a rewind cut its record
(they re-attach, and reload the history)."""


def recorded_line(seq: int, text: str) -> bytes:
    """A stored wire message (`{"type", "payload"}` text) as the numbered line clients read:
    an event, or for a recorded request (which reaches its answerer as a request, unnumbered)
    a `recorded` notice that only keeps the numbering whole."""
    kind = text[10:40].split('"', 1)[0] if text.startswith('{"type": "') else ""
    head = EVENT_PARAMS if kind not in REQUEST_TYPES else _RECORDED_PARAMS
    return b'%b"seq":%d,%b}\n' % (head, seq, text[1:].encode())


_RECORDED_PARAMS = b'{"jsonrpc":"2.0","method":"recorded","params":{'


__all__ = ["REWRITTEN", "STORE_EPOCH", "backlog", "new_ring", "recorded_line", "renumbered"]
