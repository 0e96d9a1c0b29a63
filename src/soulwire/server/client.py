"""One attached connection's outbound side: a bounded queue its writer task empties.

A client that reads too slowly is not allowed to hold memory or to block anyone: when its
queue passes the limit it is dropped (close code 4008) and re-attaches from its last `seq`,
getting the gap from the session's ring, or `complete: false` and the history."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import anyio

if TYPE_CHECKING:
    from soulwire.server.messages import Entry

PARAMS_HEAD = b'"params":{'
CATCH_UP_BYTES = 1 << 18
TOO_SLOW = 4008
"""WebSocket close code: the client fell too far behind; re-attach from the last seq."""


def insert_members(line: bytes, members: bytes) -> bytes:
    """`line` with `members` (`"a":1,`) first inside its params object."""
    at = line.find(PARAMS_HEAD)
    if at < 0 or not members:
        return line
    at += len(PARAMS_HEAD)
    if line[at : at + 1] == b"}":
        members = members.rstrip(b",")
    return line[:at] + members + line[at:]


class Client:
    """A connection as the session sees it: role, extensions, what was sent, a queue."""

    def __init__(
        self, number: int, *, max_queued_bytes: int, max_message_bytes: int = 1 << 20, read_only: bool = False
    ) -> None:
        self.number = number
        self.mode: Literal["controller", "observer"] = "observer"
        self.extended = False
        """Negotiated the extensions: events carry `seq`, requests deadlines, notices arrive."""
        self.read_only = read_only
        self.max_message_bytes = max_message_bytes
        self.batch = False
        self.receipts = True
        self.key: str | None = None
        """The client's `client_key` (answers to its requests survive a reconnect)."""
        self._after_catch_up: list[bytes] = []
        """With the extensions: `cancel` is answered with a receipt (unless declined)."""
        """Negotiated `batch`: the writer joins queued messages into frames of up to
        `max_message_bytes`, newline-separated."""
        self.last_sent = 0
        self.max_queued_bytes = max_queued_bytes
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._wake = anyio.Event()
        self._woken = False
        self._ring: Callable[[int, int], list[Entry] | None] | None = None
        """While catching up: where the writer pulls the missed entries from."""
        self.closed = False
        self.close_code = 1000
        self.close_reason = ""

    def catch_up(self, after: int, ring: Callable[[int, int], list[Entry] | None]) -> None:
        """Send the entries numbered above `after`, pulled from the ring as the connection
        takes them (a long gap never floods the queue), then go on live."""
        self.last_sent = after
        self._ring = ring
        self._wake.set()

    @property
    def queued(self) -> bool:
        """Messages wait for the writer."""
        return bool(self._queue)

    def deliver_after_catch_up(self, lines: list[bytes]) -> None:
        """Messages that belong after the events being caught up on (answers to requests
        whose events are still in the backlog)."""
        if self._ring is None:
            for line in lines:
                self.deliver(line)
        else:
            self._after_catch_up.extend(lines)

    def send_entry(self, entry: Entry) -> None:
        """A numbered message, in the form this client negotiated."""
        if self._ring is not None:
            return  # catching up: the writer pulls this one from the ring in its turn
        self._send_entry(entry)

    def _send_entry(self, entry: Entry) -> None:
        self.last_sent = entry.seq
        if not self.extended:
            if entry.kind != "notice":
                self.deliver(entry.line)
            return
        line = entry.line
        if len(line) > self.max_message_bytes:
            line = entry.reference() or line
        self.deliver(insert_members(line, entry.extra))

    def deliver(self, line: bytes) -> None:
        """Queue one message (never blocks); past the limit the client is dropped."""
        if self.closed:
            return
        self._queue.append(line)
        self._queued += len(line)
        if self._queued > self.max_queued_bytes:
            self.close(TOO_SLOW, "too slow: re-attach from your last seq")
            return
        if not self._woken:  # once per writer pass, not once per message
            self._woken = True
            self._wake.set()

    async def next_batch(self) -> list[bytes] | None:
        """Everything queued (waiting for something); None once the client is closed."""
        while not self._queue:
            if self.closed:
                return None
            if self._ring is not None:
                self._pull()
                continue
            await self._wake.wait()
            self._wake = anyio.Event()
            self._woken = False
        batch = list(self._queue)
        self._queue.clear()
        self._queued = 0
        return batch

    def frames(self, batch: list[bytes]) -> list[str]:
        """The text frames a batch goes out as: one per message, or (negotiated) as few as
        fit in `max_message_bytes`, each message ending with a newline."""
        if not self.batch:
            return [line.rstrip(b"\n").decode("utf-8", "replace") for line in batch]
        frames: list[str] = []
        limit = self.max_message_bytes
        start = size = 0
        for end, line in enumerate(batch):
            if size and size + len(line) > limit:
                frames.append(b"".join(batch[start:end]).decode("utf-8", "replace"))
                start, size = end, 0
            size += len(line)
        frames.append(b"".join(batch[start:]).decode("utf-8", "replace"))
        return frames

    def _pull(self) -> None:
        assert self._ring is not None
        entries = self._ring(self.last_sent, min(CATCH_UP_BYTES, self.max_queued_bytes // 2))
        if entries is None:
            self._ring = None
            self.close(TOO_SLOW, "the events to catch up on left the ring: re-attach")
        elif not entries:
            self._ring = None  # caught up: live from here
            later, self._after_catch_up = self._after_catch_up, []
            for line in later:
                self.deliver(line)
        else:
            for entry in entries:
                self._send_entry(entry)

    def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_code = code
            self.close_reason = reason
            self._queue.clear()
            self._queued = 0
            self._wake.set()


__all__ = ["TOO_SLOW", "Client", "insert_members"]
