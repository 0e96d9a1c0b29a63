"""A streamed response's server-sent events as decoded JSON, read from the raw HTTP response the
SDK returns unread (its generic `post` with `stream=True`): the SDK still sends the request
(auth, headers, timeouts, status errors), but its stream would build a typed model for every
chunk, a third of a model call's client-side CPU, only for the adapter to read a few fields
back out of it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import import_module
from typing import Any, cast

import anyio

_DRAIN_S = 0.1
"""How long the rest of a body after `[DONE]` may take to arrive: read to its end, the
connection goes back to the pool instead of being closed."""


_DONE = object()
"""The `[DONE]` event that ends an OpenAI stream."""


class EventData:
    """`async with EventData(send, on_error) as events: async for data in events: …`.

    `send()` returns an awaitable of the streamed HTTP response (an `httpx2.Response` whose
    body is not read yet); `data` is each event's JSON. An event that reports an error
    (`event: error`, or an `error` member) is handed to `on_error`, which returns the
    exception to raise; undecodable data raises ValueError, as the SDK's stream does."""

    def __init__(self, send: Callable[[], Awaitable[Any]], on_error: Callable[[Any], BaseException]) -> None:
        self._send = send
        self._on_error = on_error
        self._response: Any = None

    async def __aenter__(self) -> EventData:
        self._response = await self._send()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._response.aclose()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        # Bytes, split on the blank line that ends each event: the response's text-line
        # iterator decodes and splits in Python, a measurable share of a call's CPU.
        chunks = self._response.aiter_bytes()
        pending = b""
        async for chunk in chunks:
            pending += chunk
            if b"\r" in pending:
                # CRLF and lone CR end lines too; keep a trailing CR until its LF may follow.
                held = b"\r" if pending.endswith(b"\r") else b""
                pending = pending[: len(pending) - len(held)]
                pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + held
            *blocks, pending = pending.split(b"\n\n")
            for block in blocks:
                data = self._data(block)
                if data is _DONE:
                    await _drain(chunks)
                    return
                if data is not None:
                    yield data
        data = self._data(pending)  # an event the stream ended without a blank line after
        if data is not None and data is not _DONE:
            yield data

    def _data(self, block: bytes) -> Any:
        """One event's decoded data (None for an event without data); raises for an error."""
        event: bytes | None = None
        lines: list[bytes] = []
        for line in block.split(b"\n"):
            field, _, value = line.partition(b":")
            if field == b"data":
                lines.append(value[1:] if value.startswith(b" ") else value)
            elif field == b"event":
                event = value.strip()
        if not lines:
            return None
        text = b"\n".join(lines)
        if text.startswith(b"[DONE]"):
            return _DONE
        decoded: Any = json.loads(text)
        if isinstance(decoded, dict) and (event == b"error" or cast(dict[str, Any], decoded).get("error")):
            raise self._on_error(decoded)
        return decoded


def post_events(
    client: Any, path: str, body: dict[str, Any], on_error: Callable[[Any], BaseException]
) -> EventData:
    """`body` POSTed to `path` with `"stream": true` through the SDK client's generic `post`
    (its auth, headers, timeouts and status errors), the response left unread and read here
    as events. The typed calls (`chat.completions.create`, `responses.create`,
    `messages.create`) first walk the body against the SDK's parameter types, and their
    streams build a typed model for every event, only for the adapter to read a few fields
    back out of it."""

    def send() -> Any:
        return client.post(
            path, cast_to=import_module("httpx2").Response, body={**body, "stream": True}, stream=True
        )

    return EventData(send, on_error)


def as_dict(value: Any) -> dict[str, Any]:
    """A decoded JSON object (an empty one for anything else)."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def as_str(value: Any) -> str:
    """A decoded JSON string ("" for anything else)."""
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int:
    """A decoded JSON integer (0 for anything else, booleans included)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    with anyio.move_on_after(_DRAIN_S):
        async for _ in chunks:
            pass


__all__ = ["EventData", "as_dict", "as_int", "as_str", "post_events"]
