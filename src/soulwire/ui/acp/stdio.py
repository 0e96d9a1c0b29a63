"""Newline-delimited JSON over file descriptors, stdlib only (used before asyncio exists)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

_CHUNK = 1 << 16
_FLUSH_AT = 1 << 16


class LineInput:
    """Lines read from `fd` by blocking reads, any length; a line can be put back."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._eof = False

    def read_line(self) -> bytes | None:
        """The next line without its newline; None at end of input."""
        while True:
            index = self._buffer.find(b"\n")
            if index >= 0:
                line = bytes(self._buffer[:index])
                del self._buffer[: index + 1]
                return line
            if self._eof:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line
                return None
            try:
                chunk = os.read(self.fd, _CHUNK)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True

    def push_front(self, line: bytes) -> None:
        self._buffer[0:0] = line + b"\n"


class LineOutput:
    """Writes one JSON message per line to `fd`. Once bound to an event loop, lines are
    gathered and written at the end of the loop's current iteration (or at 64 KiB): a fast
    stream costs one write per batch, not per chunk, and nothing is reordered."""

    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self.closed = False
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._schedule: Callable[[Callable[[], None]], Any] | None = None
        self._scheduled = False

    def bind(self, schedule: Callable[[Callable[[], None]], Any] | None) -> None:
        """Batch from now on, flushing through `schedule` (the loop's call_soon); None: unbind."""
        self.flush()
        self._schedule = schedule

    def send(self, message: dict[str, Any]) -> None:
        self.write(
            (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
        )

    def write(self, data: bytes) -> None:
        with self._lock:
            if self.closed:
                return
            self._buffer += data
            if self._schedule is None or len(self._buffer) >= _FLUSH_AT:
                self._flush_locked()
            elif not self._scheduled:
                self._scheduled = True
                self._schedule(self.flush)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._scheduled = False
        if not self._buffer or self.closed:
            return
        view = memoryview(self._buffer)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError:
            self.closed = True  # the editor went away; nothing more can reach it
        finally:
            view.release()
            self._buffer.clear()


def error_message(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def result_message(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
