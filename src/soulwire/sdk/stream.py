"""An async-iterable queue filled by the connection's reader: events are appended as they
arrive and the consumer is woken once per batch, so a fast stream costs a deque append and
a pop per event."""

from __future__ import annotations

from collections import deque
from typing import Any

import anyio


class EventStream:
    """Single-consumer stream of items ending with `_finish()` (optionally with a failure,
    raised to the consumer after the last item)."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: anyio.Event | None = None
        self._finished = False
        self._failure: BaseException | None = None
        self._ended = anyio.Event()

    # -- producer side (the reader, on the event loop) -------------------------
    def _push(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            waiter.set()

    def _finish(self, failure: BaseException | None = None) -> None:
        if self._finished:
            return
        self._finished = True
        self._failure = failure
        waiter = self._waiter
        if waiter is not None:
            waiter.set()
        self._ended.set()

    @property
    def finished(self) -> bool:
        """The engine answered: every item is queued (the consumer may still be behind)."""
        return self._finished

    # -- consumer side ------------------------------------------------------------
    def _consumer_cancelled(self) -> None:
        """The task waiting on this stream was cancelled (subclasses cancel the engine side)."""

    async def _wait_for_item(self) -> bool:
        """True once an item is queued, False when the stream ended with none left."""
        while not self._items:
            if self._finished:
                return False
            waiter = anyio.Event()
            self._waiter = waiter
            try:
                await waiter.wait()
            except anyio.get_cancelled_exc_class():
                self._consumer_cancelled()
                raise
            finally:
                self._waiter = None
        return True

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Any:
        items = self._items
        if items:
            return items.popleft()
        if await self._wait_for_item():
            return items.popleft()
        if self._failure is not None:
            raise self._failure
        raise StopAsyncIteration

    async def _peek(self) -> Any:
        """The next item without consuming it; `_END` when the stream is over."""
        if self._items or await self._wait_for_item():
            return self._items[0]
        return _END

    async def _drain(self) -> None:
        """Wait for the end, discarding unread items (they stay in the records)."""
        while True:
            self._items.clear()
            if self._finished:
                return
            await self._wait_for_item()

    async def _batch(self) -> list[Any]:
        """Everything queued (waiting for at least one item); [] at the end."""
        if not self._items and not await self._wait_for_item():
            if self._failure is not None:
                raise self._failure
            return []
        items = list(self._items)
        self._items.clear()
        return items


class _EndMarker:
    def __repr__(self) -> str:
        return "<end of stream>"


_END: Any = _EndMarker()


__all__ = ["EventStream"]
