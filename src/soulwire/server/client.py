"""One attached connection's outbound side, emptied by its writer task.

A client of the extensions reads the session's ring (server/ring.py) from its last `seq`:
its writer takes everything new in one slice per pass, so an event costs it nothing until
then. Messages that are not numbered (answers, errors, `attached`, a replay) wait in a small
queue, each marked with the `seq` it follows. A client of today's Wire gets copies of the
events (without `seq`) in that queue instead.

A client that reads too slowly is not allowed to hold memory or to block anyone: once it is
further behind than its limit it is dropped (close code 4008) and re-attaches from its last
`seq`, getting the gap from the ring, or `complete: false` and the history."""

from __future__ import annotations

from collections import deque
from typing import Literal

import anyio

from soulwire.server.ring import Ring, insert_members

CATCH_UP_BYTES = 1 << 18
"""What one writer pass takes from the ring at most."""
TOO_SLOW = 4008
"""WebSocket close code: the client fell too far behind; re-attach from the last seq."""


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
        self.user: str | None = None
        """The named user this connection speaks for (server/users.py; None: the single token)."""
        self.max_message_bytes = max_message_bytes
        self.batch = False
        """Negotiated `batch`: the writer joins what it takes into frames of up to
        `max_message_bytes`, newline-separated."""
        self.receipts = True
        """With the extensions: `cancel` is answered with a receipt (unless declined)."""
        self.key: str | None = None
        """The client's `client_key` (answers to its requests survive a reconnect)."""
        self.last_sent = 0
        """The number of the last message taken for this client."""
        self.catching_up = False
        """Reading a backlog from the ring at its own pace (not yet live)."""
        self.max_queued_bytes = max_queued_bytes
        self.ring: Ring | None = None
        """The ring this client reads (None: today's Wire, everything comes in the queue)."""
        self._queue: deque[bytes] = deque()
        self._marks: deque[int] = deque()
        """For each queued message, the `seq` it follows."""
        self._queued = 0
        self._wake = anyio.Event()
        self._woken = False
        self.closed = False
        self.close_code = 1000
        self.close_reason = ""

    def read_ring(self, ring: Ring, after: int) -> None:
        """From now on take the ring's messages numbered above `after` (a backlog at the
        connection's pace, then live). Messages already queued come first."""
        self.ring = ring
        self.last_sent = after
        self.catching_up = after < ring.seq
        self.wake()

    @property
    def queued(self) -> bool:
        """Messages wait for the writer."""
        return bool(self._queue) or (self.ring is not None and self.last_sent < self.ring.seq)

    def deliver(self, line: bytes) -> None:
        """Queue one message after what the session has numbered so far (never blocks); past
        the limit the client is dropped."""
        self._enqueue(line, self.ring.seq if self.ring is not None else 0)

    def deliver_first(self, line: bytes) -> None:
        """Queue one message before the backlog the client is about to read (`attached`, the
        requests it must answer)."""
        self._enqueue(line, self.last_sent)

    def _enqueue(self, line: bytes, mark: int) -> None:
        if self.closed:
            return
        self._queue.append(line)
        self._marks.append(mark)
        self._queued += len(line)
        if self._queued > self.max_queued_bytes:
            self.close(TOO_SLOW, "too slow: re-attach from your last seq")
            return
        if not self._woken:  # once per writer pass, not once per message
            self._woken = True
            self._wake.set()

    def wake(self) -> None:
        """Something is new for the writer (once per pass)."""
        if not self._woken:
            self._woken = True
            self._wake.set()

    def too_slow(self) -> None:
        self.close(TOO_SLOW, "too slow: re-attach from your last seq")

    async def next_batch(self) -> list[bytes] | None:
        """What there is to send, in order (waiting for something); None once closed."""
        while True:
            if self.closed:
                return None
            batch = self._take()
            if batch:
                return batch
            await self._wake.wait()
            self._wake = anyio.Event()
            self._woken = False

    def _take(self) -> list[bytes]:
        ring = self.ring
        if ring is None:
            batch = list(self._queue)
            self._queue.clear()
            self._marks.clear()
            self._queued = 0
            return batch
        out: list[bytes] = []
        budget = min(CATCH_UP_BYTES, self.max_queued_bytes // 2)
        queue, marks = self._queue, self._marks
        while True:
            upto = marks[0] if marks else ring.seq
            if self.last_sent < upto and budget > 0:
                items = ring.after(self.last_sent, upto, budget, self.max_message_bytes)
                if items is None:
                    self.close(TOO_SLOW, "the events to catch up on left the ring: re-attach")
                    return out
                self.last_sent += len(items)
                budget -= sum(map(len, items))
                out += items
                continue
            if queue and self.last_sent >= upto:
                line = queue.popleft()
                marks.popleft()
                self._queued -= len(line)
                out.append(line)
                continue
            break
        if self.catching_up and self.last_sent >= ring.seq:
            self.catching_up = False  # live from here
        return out

    def frames(self, batch: list[bytes]) -> list[str]:
        """The text frames a batch goes out as: one per message, or (negotiated) as few as
        fit in `max_message_bytes`, each message ending with a newline."""
        if not self.batch:
            return [line.rstrip(b"\n").decode("utf-8", "replace") for line in batch]
        limit = self.max_message_bytes
        whole = b"".join(batch)
        if len(whole) <= limit:
            return [whole.decode("utf-8", "replace")]
        frames: list[str] = []
        start = size = 0
        for end, line in enumerate(batch):
            if size and size + len(line) > limit:
                frames.append(b"".join(batch[start:end]).decode("utf-8", "replace"))
                start, size = end, 0
            size += len(line)
        frames.append(b"".join(batch[start:]).decode("utf-8", "replace"))
        return frames

    def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_code = code
            self.close_reason = reason
            self._queue.clear()
            self._marks.clear()
            self._queued = 0
            self._wake.set()


__all__ = ["TOO_SLOW", "Client", "insert_members"]
