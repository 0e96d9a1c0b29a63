"""A real HTTP server on 127.0.0.1 that plays scripted LLM replies (SSE streams, error
statuses, stalls) and records every request it receives. Stdlib only; one thread per request.

Replies are queued per server; each incoming POST takes the next one. An empty queue answers
HTTP 400 (never retried) so a test that scripted too little fails fast and visibly."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Stall:
    """Stop sending for `seconds` (or until the server closes) in the middle of a body."""

    seconds: float = 30.0


@dataclass
class Gate:
    """Hold the rest of the body until the test sets `release` (or the server closes)."""

    release: threading.Event
    timeout: float = 30.0


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes | Stall | Gate] = field(default_factory=list)
    """Written one by one (flushed), so the client sees a real stream."""


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    client: tuple[str, int] = ("", 0)
    """The client's address: one per connection (kept-alive requests share it)."""


def sse(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event; `data` is JSON-encoded unless it is already text."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        headers={"content-type": "application/json", **(headers or {})},
        chunks=[json.dumps(body).encode()],
    )


def sse_reply(chunks: list[bytes | Stall]) -> Reply:
    return Reply(headers={"content-type": "text/event-stream", "cache-control": "no-cache"}, chunks=chunks)


class FakeLLMServer:
    """`with FakeLLMServer() as server: server.queue(reply, …); … server.requests`."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._closed: set[tuple[str, int]] = set()
        self._closed_changed = threading.Condition(self._lock)
        self._closing = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Real providers send with TCP_NODELAY; without it every answer on a kept-alive
            # connection waits ~40 ms for the client's delayed ACK (Nagle), which no real API has.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with owner._lock:
                    client = (str(self.client_address[0]), int(self.client_address[1]))
                    owner.requests.append(Recorded(self.path, dict(self.headers.items()), body, client))
                    reply = owner._replies.popleft() if owner._replies else None
                if reply is None:
                    reply = json_reply(400, {"error": {"message": "fake server: no scripted reply"}})
                owner._play(self, reply)

            def finish(self) -> None:  # the connection ended (either side closed it)
                super().finish()
                with owner._closed_changed:
                    owner._closed.add((str(self.client_address[0]), int(self.client_address[1])))
                    owner._closed_changed.notify_all()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()

    def forget_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def bodies(self) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests]

    def _play(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        # Kept alive like a real API's connection, except after a stall or a failure.
        handler.close_connection = True
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            for chunk in reply.chunks:
                if isinstance(chunk, Stall):
                    self._closing.wait(chunk.seconds)
                    return  # the client gave up (or the test ended): drop the connection
                if isinstance(chunk, Gate):
                    chunk.release.wait(chunk.timeout)
                    continue
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
            handler.close_connection = self._closing.is_set()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def wait_closed(self, client: tuple[str, int], timeout: float = 10.0) -> bool:
        """Whether the connection from `client` (a `Recorded.client`) ended within `timeout`."""
        with self._closed_changed:
            return self._closed_changed.wait_for(lambda: client in self._closed, timeout)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count and time.monotonic() < deadline:
            time.sleep(0.01)
