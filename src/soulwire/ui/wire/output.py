"""The stdout writer: lines are appended to a buffer and written in batches — at the end of
the current event-loop iteration, or at once when 64 KiB are waiting — so a fast stream
costs one syscall per batch, not per event, and the first event is not held back."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

FLUSH_AT = 1 << 16


class OutputWriter:
    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._scheduled = False
        self._schedule: Callable[[Callable[[], Any]], Any] | None = None
        self.closed = False

    def bind(self, schedule: Callable[[Callable[[], Any]], Any]) -> None:
        """Give the writer a way to run a flush soon (the event loop's call_soon)."""
        self._schedule = schedule

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._buffer += data
        if len(self._buffer) >= FLUSH_AT or self._schedule is None:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._schedule(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self._buffer or self.closed:
            return
        view = memoryview(self._buffer)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except (BrokenPipeError, OSError):
            self.closed = True  # the client went away; nothing more can reach it
        finally:
            view.release()
            self._buffer.clear()
