"""The ACP SDK's message transport over our stdin/stdout.

The SDK's own stdio framing drops a line that is not JSON without a word; JSON-RPC wants
`-32700` with `id: null`, and a non-object message `-32600`. `initialize` is answered here
too, from the stdlib handshake the start-up path already used, so both answers agree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import anyio
import anyio.to_thread

from soulwire.ui.acp.stdio import LineInput, LineOutput, error_message
from soulwire.wire.jsonrpc import INVALID_REQUEST, PARSE_ERROR, RPCError, parse

InitializeHandler = Callable[[Any, Any], dict[str, Any]]
"""(request id, params) → the whole response message."""


def inbound(line: bytes | str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A line an editor sent, checked as the agent's stdio and the server's ACP socket both
    check it: (the message to handle, None), (None, the JSON-RPC error to answer it with:
    -32700 not JSON, -32600 not a request, a response or a notification), or (None, None) for a
    blank line. Strict UTF-8, lone surrogate escapes replaced, nesting bounded (`parse`)."""
    if not line.strip():
        return None, None
    try:
        message: Any = parse(line)
    except RPCError as error:
        text = "Parse error" if error.code == PARSE_ERROR else error.message
        return None, error_message(None, error.code, text)
    if not isinstance(message, dict):
        return None, error_message(None, INVALID_REQUEST, "Invalid request")
    request = cast(dict[str, Any], message)
    method = request.get("method")
    if "id" in request and method is None and "result" not in request and "error" not in request:
        return None, error_message(request["id"], INVALID_REQUEST, "Invalid request")
    if method is not None and not isinstance(method, str):
        return None, error_message(request.get("id"), INVALID_REQUEST, "Invalid request")
    return request, None


class Deferrals:
    """Jobs run right after the response that introduces a session is written (the one of
    `session/new`, `load` or `resume`): an update about a session must not reach the editor
    before the session's id does. A transport tells it what it received and what it sent."""

    def __init__(self) -> None:
        self._deferred: dict[str, list[Callable[[], None]]] = {}
        self._naming: dict[Any, str] = {}  # request id → the session its params name

    def defer(self, session_id: str, job: Callable[[], None]) -> None:
        self._deferred.setdefault(session_id, []).append(job)

    def received(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        naming = message.get("method") in ("session/load", "session/resume") and "id" in message
        if naming and isinstance(params, dict):
            self._naming[message["id"]] = str(params.get("sessionId"))

    def sent(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" not in message:
            named = self._naming.pop(message["id"], None)
            if not self._deferred:
                return
            result = message.get("result")
            session_id = result.get("sessionId") if isinstance(result, dict) else None
            for job in self._deferred.pop(str(session_id or named), []):
                job()


class StdioTransport:
    """Implements the SDK's `Transport` protocol (send / receive / close)."""

    def __init__(self, reader: LineInput, writer: LineOutput, on_initialize: InitializeHandler) -> None:
        self._reader = reader
        self._writer = writer
        self._on_initialize = on_initialize
        self.deferrals = Deferrals()
        self.defer = self.deferrals.defer

    async def send(self, message: dict[str, Any]) -> None:
        self._writer.send(message)
        self.deferrals.sent(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await anyio.to_thread.run_sync(self._reader.read_line, abandon_on_cancel=True)
            if line is None:
                return None
            message = self._accept(line)
            if message is not None:
                return message

    def _accept(self, line: bytes) -> dict[str, Any] | None:
        """The message to hand to the SDK, or None when it was answered here (or is blank)."""
        message, error = inbound(line)
        if error is not None:
            self._writer.send(error)
        if message is None:
            return None
        method = message.get("method")
        self.deferrals.received(message)
        if method == "initialize" and "id" in message:
            self._writer.send(self._on_initialize(message["id"], message.get("params")))
            return None
        return message

    async def close(self) -> None:
        return None
