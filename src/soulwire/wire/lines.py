"""Reading newline-delimited input from a file descriptor, without asyncio (the lean
start-up path reads the first line with it, and the server's reader thread continues)."""

from __future__ import annotations

import os

CHUNK = 1 << 16


class LineReader:
    """Splits bytes read from `fd` into lines of any length (no 64 KiB limit)."""

    def __init__(self, fd: int, pending: bytes = b"") -> None:
        self.fd = fd
        self._buffer = bytearray(pending)
        self._scan_from = 0
        self.eof = False

    def feed(self, chunk: bytes | None) -> list[bytes]:
        """Add bytes read elsewhere (an event loop's reader); returns the complete lines.
        An empty chunk means end of input (a final unterminated line is returned too); None
        adds nothing and returns the lines already buffered."""
        if chunk:
            self._buffer += chunk
        elif chunk is not None:
            self.eof = True
        lines: list[bytes] = []
        while True:
            index = self._buffer.find(b"\n", self._scan_from)
            if index < 0:
                self._scan_from = len(self._buffer)
                break
            lines.append(bytes(self._buffer[:index]))
            del self._buffer[: index + 1]
            self._scan_from = 0
        if self.eof and self._buffer:
            lines.append(bytes(self._buffer))
            self._buffer.clear()
            self._scan_from = 0
        return lines

    def push_front(self, line: bytes) -> None:
        """Put a line back so that the next read returns it again."""
        self._buffer[0:0] = line + b"\n"
        self._scan_from = 0

    def read_line(self) -> bytes | None:
        """The next line without its newline; None at end of input (a final unterminated
        line is returned first)."""
        while True:
            index = self._buffer.find(b"\n", self._scan_from)
            if index >= 0:
                line = bytes(self._buffer[:index])
                del self._buffer[: index + 1]
                self._scan_from = 0
                return line
            if self.eof:
                if self._buffer:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    return line
                return None
            self._scan_from = len(self._buffer)
            try:
                chunk = os.read(self.fd, CHUNK)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
            else:
                self._buffer += chunk
