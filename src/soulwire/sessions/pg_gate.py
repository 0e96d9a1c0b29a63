"""Delivery gated on the group commit (the PostgreSQL store behind a live session's hub).

Behind a gate the store's appends never wait for their commit on the session's thread: each is
counted (`submitted`) and the writer reports it committed (`committed`, from its thread) or lost
(`lost`, a failed batch: what the session queued after its last committed append). A reader
that must deliver only what is durable (server/hub.py) notes the count when it has something
to send and sends it once `outcome` says the appends before it are committed, or as failed
once they were lost. Counts, not wire `seq`s: a state or context append gates too (a turn's
answer waits for the state its end saved), and a rewind that renumbers the record changes
nothing here."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

Outcome = Literal["committed", "lost", "pending"]


class CommitGate:
    """One session's appends as its reader waits for them (see the module docstring)."""

    def __init__(
        self,
        on_recorded: Callable[[int, str], None],
        on_committed: Callable[[], None],
        on_lost: Callable[[Exception], None],
        on_failing: Callable[[], None],
    ) -> None:
        """`on_recorded` (seq, text) of each wire message committed, then `on_committed`, from
        the writer's thread; `on_failing` (the writer's thread) that some appends failed: the
        store's `take_failure` on the session's thread takes it, and `on_lost` is told there."""
        self.submitted = 0
        """Appends handed to the writer since the gate was set."""
        self.committed = 0
        """The last of them committed (written by the writer's thread)."""
        self.lost = (0, 0)
        """The appends last lost: those numbered above the first and up to the second."""
        self._on_recorded = on_recorded
        self._on_committed = on_committed
        self._on_lost = on_lost
        self.on_failing = on_failing

    def next(self, seq: int = 0, text: str = "") -> Callable[[], None]:
        """Count one append (a wire message's `seq` and text, or none); returns what the
        writer calls once it is committed."""
        self.submitted += 1
        return functools.partial(self._done, self.submitted, seq, text)

    def _done(self, n: int, seq: int, text: str) -> None:
        if seq:
            self._on_recorded(seq, text)  # numbered before anything that waits for it goes
        self.committed = n
        self._on_committed()

    def lose(self, failure: Exception) -> None:
        """Everything not committed so far is lost (the session's thread)."""
        self.lost = (self.committed, self.submitted)
        self._on_lost(failure)

    def outcome(self, n: int) -> Outcome:
        """What became of the appends up to the `n`th."""
        after, through = self.lost
        if after < n <= through:
            return "lost"
        return "committed" if n <= self.committed else "pending"


__all__ = ["CommitGate", "Outcome"]
