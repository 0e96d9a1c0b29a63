"""A session's numbered outbound messages: `seq`, the bounded ring, and the line form that
clients of the extensions read.

Every message the session publishes is numbered and kept, already in the form an extended
client gets (`"seq":N` first inside `params`), as one `bytes` object: the splice happens once
per message, not once per client, and the ring holds no objects the cyclic GC must walk.
Extended clients do not get a copy each: their writers read the ring from where they are
(`after`), one list slice per pass. The sequence is contiguous, so an entry's number is its
position: `seq` of `_buf[i]` is `_first + i`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

PARAMS_HEAD = b'"params":{'
EVENT_HEAD = b'{"jsonrpc":"2.0","method":"event",'
EVENT_PARAMS = EVENT_HEAD + PARAMS_HEAD
_AT = len(EVENT_PARAMS)
_SEQ_EVENT = EVENT_PARAMS + b'"seq":'
MAX_TAKE = 4096
"""Messages one read takes at most (a writer's pass; a long gap is read in several)."""
TRIM_SLACK = 256
"""Messages over `max_events` before the oldest go, together (not one per new message);
at most an eighth of the ring."""


def insert_members(line: bytes, members: bytes) -> bytes:
    """`line` with `members` (`"a":1,`) first inside its params object."""
    at = line.find(PARAMS_HEAD)
    if at < 0 or not members:
        return line
    at += len(PARAMS_HEAD)
    if line[at : at + 1] == b"}":
        members = members.rstrip(b",")
    return line[:at] + members + line[at:]


class Referenced:
    """A message too large for some client's `max_message_bytes`: the form with its payload
    stored as a blob (`blob: {blob_id, size, preview}`) is made the first time one needs it."""

    __slots__ = ("_made", "_referencer", "line")

    def __init__(self, line: bytes, referencer: Callable[[bytes], bytes | None]) -> None:
        self.line = line
        self._referencer: Callable[[bytes], bytes | None] | None = referencer
        self._made: bytes | None = None

    def reference(self) -> bytes:
        if self._referencer is not None:
            self._made, self._referencer = self._referencer(self.line), None
        return self._made or self.line


class Reader(Protocol):
    """What the ring needs of a client that reads it (server/client.py)."""

    last_sent: int
    catching_up: bool
    closed: bool
    max_queued_bytes: int
    max_message_bytes: int

    def wake(self) -> None: ...

    def too_slow(self) -> None: ...


class Ring:
    """The numbered messages of one session, the newest `max_events` / `max_bytes` kept, and
    never one a live reader has still to read unless it is further behind than it may be."""

    def __init__(
        self,
        max_events: int,
        max_bytes: int,
        *,
        large: int,
        referencer: Callable[[bytes], bytes | None],
    ) -> None:
        self.seq = 0
        """The number of the newest message (0: none yet)."""
        self.bytes = 0
        """Size of the kept messages."""
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.readers: tuple[Reader, ...] = ()
        """The clients that read the ring (set by the session as they come and go)."""
        self._buf: list[bytes] = []
        self._head = 0
        """Index of the oldest kept message in `_buf` (older ones are dropped in bulk)."""
        self._first = 1
        """`seq` of `_buf[0]`."""
        self._slack = min(TRIM_SLACK, max_events // 8)
        self._full_at = max_events + self._slack
        """`len(_buf)` past which old messages go (a few hundred at a time)."""
        self._large = large
        self._referencer = referencer
        self._referenced: dict[int, Referenced] = {}
        """Kept messages larger than `large`, by seq (few: their payloads are blob-able)."""

    def start_after(self, seq: int) -> None:
        """Number the next message `seq + 1` (an empty ring continuing a stored sequence)."""
        assert not self._buf, "only an empty ring continues another sequence"
        self.seq = seq
        self._first = seq + 1

    @property
    def oldest(self) -> int:
        """The number of the oldest kept message (`seq + 1` while none is kept)."""
        return self._first + self._head

    def publish(self, line: bytes, extra: bytes = b"") -> bytes:
        """Number a message; returns the form extended clients get (`"seq":N,` and `extra`
        first inside its params)."""
        seq = self.seq = self.seq + 1
        if not extra and line.startswith(EVENT_PARAMS) and line[_AT] != 125:  # not `}`: params has members
            numbered = b"%b%d,%b" % (_SEQ_EVENT, seq, line[_AT:])  # the hot path: every event
        else:
            numbered = insert_members(line, b'"seq":%d,%b' % (seq, extra))
        self._keep(seq, numbered)
        return numbered

    def add(self, numbered: bytes) -> None:
        """Keep a message already framed with `"seq":N` (N = `seq + 1`: the caller numbered
        it, as the hub does for streamed parts)."""
        seq = self.seq = self.seq + 1
        buf = self._buf
        buf.append(numbered)
        size = len(numbered)
        self.bytes += size
        if size > self._large or len(buf) > self._full_at or self.bytes > self.max_bytes:
            self._kept_large_or_full(seq, numbered)

    def _keep(self, seq: int, numbered: bytes) -> None:
        buf = self._buf
        buf.append(numbered)
        self.bytes += len(numbered)
        self._kept_large_or_full(seq, numbered)

    def _kept_large_or_full(self, seq: int, numbered: bytes) -> None:
        if len(numbered) > self._large:
            self._referenced[seq] = Referenced(numbered, self._referencer)
        if len(self._buf) > self._full_at or self.bytes > self.max_bytes:
            self._trim()

    def _trim(self) -> None:
        """Drop the oldest messages down to the bounds, but not past what a live reader has
        still to read, unless it is too far behind (then it is dropped, to re-attach)."""
        buf = self._buf
        floor = self._unread_floor()
        while self._head < len(buf) - 1 and (
            len(buf) - self._head > self.max_events or self.bytes > self.max_bytes
        ):
            seq = self._first + self._head
            if seq >= floor:
                self._drop_slow_readers(seq)
                floor = self._unread_floor()
                if seq >= floor:
                    break  # over the bounds for now: readers within their allowance catch up
            self.bytes -= len(buf[self._head])
            if self._referenced:
                self._referenced.pop(seq, None)
            self._head += 1
        if self._head > 1024 and self._head * 2 > len(buf):  # forget the dropped ones in bulk
            del buf[: self._head]
            self._first += self._head
            self._head = 0
        self._full_at = max(len(buf), self._head + self.max_events) + self._slack

    def _unread_floor(self) -> int:
        """The oldest message a live reader has not read (past `seq` when none)."""
        floor = self.seq + 1
        for reader in self.readers:
            if not reader.catching_up and not reader.closed and reader.last_sent < floor:
                floor = reader.last_sent + 1
        return floor

    def _drop_slow_readers(self, seq: int) -> None:
        for reader in self.readers:
            live = reader.last_sent < seq and not reader.catching_up and not reader.closed
            if live and self.unread_bytes(reader) > reader.max_queued_bytes:
                reader.too_slow()

    def unread_bytes(self, reader: Reader) -> int:
        """Size of what `reader` has still to read (large messages as their reference)."""
        seq = reader.last_sent
        start = max(seq + 1 - self._first, self._head)
        size = sum(map(len, self._buf[start:]))
        for number, entry in self._referenced.items():
            if number > seq and len(entry.line) > reader.max_message_bytes:
                size -= len(entry.line)
        return size

    def after(self, seq: int, upto: int, max_bytes: int, max_message_bytes: int) -> list[bytes] | None:
        """The messages numbered `seq + 1` to `upto` — at least one, then up to `max_bytes`
        (and `MAX_TAKE`) — with those above `max_message_bytes` by reference; None when some
        already left the ring."""
        if seq >= upto:
            return []
        start = seq + 1 - self._first
        if start < self._head:
            return None
        stop = min(upto + 1 - self._first, start + MAX_TAKE)
        items = self._buf[start:stop]
        if self._referenced and max(self._referenced) > seq:
            for index, item in enumerate(items):
                if len(item) > max_message_bytes:
                    found = self._referenced.get(seq + 1 + index)
                    if found is not None:
                        items[index] = found.reference()
        size = sum(map(len, items))
        if size > max_bytes and len(items) > 1:  # about `max_bytes`, by their mean size
            del items[max(1, len(items) * max_bytes // size) :]
        return items


__all__ = [
    "EVENT_HEAD",
    "EVENT_PARAMS",
    "PARAMS_HEAD",
    "Reader",
    "Referenced",
    "Ring",
    "insert_members",
]
