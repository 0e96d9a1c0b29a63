"""Message streams: what a JSON-RPC peer reads messages from and writes them to.

A message is one JSON text. Outgoing messages are handed over already encoded and framed as
a line (ending in a newline, which message-oriented transports such as WebSocket may drop);
incoming ones arrive without their newline. `send` only buffers and never blocks, so the
engine's event hot path costs a buffer append; the peer's writer task calls `drain` to put
the buffer on the wire, once per event-loop pass rather than once per message.

Implementations: `FdStream` (stdin/stdout or any pair of file descriptors), `ProcessStream`
(an anyio child process's pipes), `memory_pair` (two connected in-memory ends, for tests),
and `CallbackStream`, which turns any pair of async receive/send callables — a WebSocket
connection, say — into a stream."""

from __future__ import annotations

import math
import os
import stat
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc

from soulwire.wire.lines import LineReader

if TYPE_CHECKING:  # memory streams are for tests: their module loads with `memory_pair`
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

FLUSH_AT = 1 << 16
"""Buffered bytes that make `send` write at once, bounding memory under a fast stream."""
READ_CHUNK = 1 << 18

CLOSED_ERRORS = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)


class MessageStream(Protocol):
    """Both directions of one connection."""

    async def receive(self) -> bytes:
        """The next message (without its newline); raises anyio.EndOfStream at the end."""
        ...

    def send(self, message: bytes) -> None:
        """Queue one encoded message (a line ending in a newline). Never blocks; dropped once
        the far side is gone (`broken`)."""
        ...

    async def drain(self) -> None:
        """Write out everything queued."""
        ...

    @property
    def broken(self) -> bool:
        """The far side stopped reading: nothing sent can reach it any more."""
        ...

    async def aclose(self) -> None: ...


class _Sending:
    """What every stream below shares: once the far side is gone, sends are dropped."""

    _broken = False

    @property
    def broken(self) -> bool:
        return self._broken


# ---------------------------------------------------------------- file descriptors


class FdStream(_Sending):
    """Newline-delimited messages over two file descriptors (stdin/stdout by default).

    A pipe or socket is read without blocking, waking on readiness; a regular file or a
    terminal is read in a worker thread. Writes go out in batches: at the end of the current
    event-loop pass (the peer's writer task) or at once when 64 KiB are waiting."""

    def __init__(self, reader: LineReader | None = None, write_fd: int = 1) -> None:
        self._reader = reader or LineReader(0)
        self._write_fd = write_fd
        self._lines: deque[bytes] = deque()
        self._buffer = bytearray()
        self._broken = False
        self._eof = False
        fd = self._reader.fd
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            mode = 0
        self._pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        if self._pollable and not self._reader.eof:
            os.set_blocking(fd, False)
        self._lines.extend(self._reader.feed(None))  # lines read ahead before the loop started

    # -- receiving ------------------------------------------------------------------
    async def receive(self) -> bytes:
        lines = self._lines
        while not lines:
            if self._eof or self._reader.eof:
                raise anyio.EndOfStream
            chunk = await (self._read_polled() if self._pollable else self._read_blocking())
            lines.extend(self._reader.feed(chunk))
            if not chunk:
                self._eof = True
        return lines.popleft()

    async def _read_polled(self) -> bytes:
        fd = self._reader.fd
        while True:
            try:
                return os.read(fd, READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_readable(fd)
            except OSError:
                return b""

    async def _read_blocking(self) -> bytes:
        def read() -> bytes:
            try:
                return os.read(self._reader.fd, READ_CHUNK)
            except OSError:
                return b""

        return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)

    # -- sending --------------------------------------------------------------------
    def send(self, message: bytes) -> None:
        if self._broken:
            return
        self._buffer += message
        if len(self._buffer) >= FLUSH_AT:
            self.flush()

    async def drain(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Write the buffer now (blocking until the far side has taken it)."""
        if not self._buffer or self._broken:
            return
        view = memoryview(self._buffer)
        try:
            while view:
                try:
                    written = os.write(self._write_fd, view)
                except BlockingIOError:  # stdout shares a non-blocking description with stdin
                    written = 0
                    os.set_blocking(self._write_fd, True)
                view = view[written:]
        except OSError:  # BrokenPipeError included: the client went away
            self._broken = True
        finally:
            view.release()
            self._buffer.clear()

    async def aclose(self) -> None:
        self.flush()


# ---------------------------------------------------------------- child processes


class ProcessStream(_Sending):
    """Messages over a child process's stdin and stdout (stderr is the owner's business)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._reader = LineReader(-1)
        self._lines: deque[bytes] = deque()
        self._buffer = bytearray()
        self._broken = False
        self._eof = False

    async def receive(self) -> bytes:
        lines = self._lines
        while not lines:
            if self._eof:
                raise anyio.EndOfStream
            try:
                chunk = await self._stdout.receive(READ_CHUNK)
            except CLOSED_ERRORS:
                chunk = b""
            lines.extend(self._reader.feed(chunk))
            if not chunk:
                self._eof = True
        return lines.popleft()

    def receive_batch(self) -> list[bytes]:
        """Every message already read (none waits): lets a consumer handle a burst at once."""
        batch = list(self._lines)
        self._lines.clear()
        return batch

    def send(self, message: bytes) -> None:
        if not self._broken:
            self._buffer += message

    async def drain(self) -> None:
        while self._buffer and not self._broken:
            data = bytes(self._buffer)
            self._buffer.clear()
            try:
                await self._stdin.send(data)
            except (*CLOSED_ERRORS, OSError):
                self._broken = True
                self._buffer.clear()

    async def aclose(self) -> None:
        """End of input for the child (stdin EOF)."""
        self._broken = True
        self._buffer.clear()
        try:
            await self._stdin.aclose()
        except (*CLOSED_ERRORS, OSError):
            pass


# ---------------------------------------------------------------- in memory and callbacks


class MemoryStream(_Sending):
    """One end of an in-memory connection (see `memory_pair`)."""

    def __init__(
        self, outgoing: MemoryObjectSendStream[bytes], incoming: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._outgoing = outgoing
        self._incoming = incoming
        self._broken = False

    async def receive(self) -> bytes:
        try:
            return await self._incoming.receive()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None

    def send(self, message: bytes) -> None:
        if self._broken:
            return
        try:
            self._outgoing.send_nowait(message.rstrip(b"\n"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._broken = True

    async def drain(self) -> None:
        pass

    async def aclose(self) -> None:
        self._broken = True
        await self._outgoing.aclose()
        await self._incoming.aclose()


def memory_pair() -> tuple[MemoryStream, MemoryStream]:
    """Two connected ends: what one sends, the other receives."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](math.inf)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](math.inf)
    return MemoryStream(a_send, a_receive), MemoryStream(b_send, b_receive)


class CallbackStream(_Sending):
    """A stream over async callables: `receive()` returns one message (str or bytes) and
    raises one of `closed_errors` (or returns None) at the end; `send(text)` sends one. This
    is the shape a WebSocket connection has (`receive_text` / `send_text`)."""

    def __init__(
        self,
        receive: Callable[[], Awaitable[str | bytes | None]],
        send: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[None]] | None = None,
        *,
        closed_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._receive = receive
        self._send = send
        self._close = close
        self._closed_errors = (*CLOSED_ERRORS, *closed_errors)
        self._queue: deque[bytes] = deque()
        self._broken = False

    async def receive(self) -> bytes:
        try:
            message = await self._receive()
        except self._closed_errors:
            raise anyio.EndOfStream from None
        if message is None:
            raise anyio.EndOfStream
        return message.encode() if isinstance(message, str) else message

    def send(self, message: bytes) -> None:
        if not self._broken:
            self._queue.append(message)

    async def drain(self) -> None:
        queue = self._queue
        while queue and not self._broken:
            message = queue.popleft()
            try:
                await self._send(message.rstrip(b"\n").decode("utf-8", "replace"))
            except (*self._closed_errors, OSError):
                self._broken = True
                queue.clear()

    async def aclose(self) -> None:
        self._broken = True
        self._queue.clear()
        if self._close is not None:
            try:
                await self._close()
            except (*self._closed_errors, OSError):
                pass


__all__ = [
    "CLOSED_ERRORS",
    "CallbackStream",
    "FdStream",
    "MemoryStream",
    "MessageStream",
    "ProcessStream",
    "memory_pair",
]
