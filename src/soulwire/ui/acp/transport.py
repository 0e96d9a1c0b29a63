"""The ACP SDK's message transport over our stdin/stdout.

The SDK's own stdio framing drops a line that is not JSON without a word; JSON-RPC wants
`-32700` with `id: null`, and a non-object message `-32600`. `initialize` is answered here
too, from the stdlib handshake the start-up path already used, so both answers agree."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from soulwire.ui.acp.stdio import LineInput, LineOutput, error_message

PARSE_ERROR, INVALID_REQUEST = -32700, -32600

InitializeHandler = Callable[[Any, Any], dict[str, Any]]
"""(request id, params) → the whole response message."""


class StdioTransport:
    """Implements the SDK's `Transport` protocol (send / receive / close)."""

    def __init__(self, reader: LineInput, writer: LineOutput, on_initialize: InitializeHandler) -> None:
        self._reader = reader
        self._writer = writer
        self._on_initialize = on_initialize
        self._deferred: dict[str, list[Callable[[], None]]] = {}
        self._naming: dict[Any, str] = {}  # request id → the session its params name

    def defer(self, session_id: str, job: Callable[[], None]) -> None:
        """Run `job` right after the response that introduces `session_id` is written: an
        update about a session must not reach the editor before the session's id does."""
        self._deferred.setdefault(session_id, []).append(job)

    async def send(self, message: dict[str, Any]) -> None:
        self._writer.send(message)
        if "id" in message and self._deferred:
            result = message.get("result")
            named = self._naming.pop(message["id"], None)
            session_id = result.get("sessionId") if isinstance(result, dict) else None
            for job in self._deferred.pop(str(session_id or named), []):
                job()

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
        if not line.strip():
            return None
        try:
            message: Any = json.loads(line)
        except ValueError:
            self._writer.send(error_message(None, PARSE_ERROR, "Parse error"))
            return None
        if not isinstance(message, dict):
            self._writer.send(error_message(None, INVALID_REQUEST, "Invalid request"))
            return None
        method: Any = message.get("method")  # pyright: ignore[reportUnknownMemberType]
        if "id" in message and method is None and "result" not in message and "error" not in message:
            self._writer.send(error_message(message["id"], INVALID_REQUEST, "Invalid request"))
            return None
        if method is not None and not isinstance(method, str):
            self._writer.send(error_message(message.get("id"), INVALID_REQUEST, "Invalid request"))  # pyright: ignore[reportUnknownMemberType]
            return None
        params: Any = message.get("params")  # pyright: ignore[reportUnknownMemberType]
        if method in ("session/load", "session/resume") and isinstance(params, dict) and "id" in message:
            self._naming[message["id"]] = str(params.get("sessionId"))  # pyright: ignore[reportUnknownMemberType]
        if method == "initialize" and "id" in message:
            self._writer.send(self._on_initialize(message["id"], message.get("params")))  # pyright: ignore[reportUnknownMemberType]
            return None
        return message  # pyright: ignore[reportUnknownVariableType]

    async def close(self) -> None:
        return None
