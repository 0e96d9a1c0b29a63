"""A streamed response's server-sent events as decoded JSON, read from the SDK's raw streaming
response (`with_streaming_response`): the SDK still sends the request (auth, headers, timeouts,
status errors), but its stream would build a typed model for every chunk, a third of a model
call's client-side CPU, only for the adapter to read a few fields back out of it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import anyio

_DRAIN_S = 0.1
"""How long the rest of a body after `[DONE]` may take to arrive: read to its end, the
connection goes back to the pool instead of being closed."""


class EventData:
    """`async with EventData(manager, on_error) as events: async for data in events: …`.

    `manager` is the SDK's response context manager; `data` is each event's JSON. An event that
    reports an error (`event: error`, or an `error` member) is handed to `on_error`, which
    returns the exception to raise; undecodable data raises ValueError, as the SDK's stream
    does."""

    def __init__(self, manager: Any, on_error: Callable[[Any], BaseException]) -> None:
        self._manager = manager
        self._on_error = on_error
        self._response: Any = None

    async def __aenter__(self) -> EventData:
        self._response = await self._manager.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._manager.__aexit__(*exc)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        lines = self._response.iter_lines()
        event: str | None = None
        data: list[str] = []
        async for line in lines:
            if line:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    data.append(value)
                elif field == "event":
                    event = value
                continue  # comments (":…"), ids and retry hints carry nothing here
            if not data:
                event = None
                continue
            text = "\n".join(data)
            data.clear()
            if text.startswith("[DONE]"):
                await _drain(lines)
                return
            decoded: Any = json.loads(text)
            if isinstance(decoded, dict) and (event == "error" or cast(dict[str, Any], decoded).get("error")):
                raise self._on_error(decoded)
            event = None
            yield decoded


async def _drain(lines: AsyncIterator[str]) -> None:
    with anyio.move_on_after(_DRAIN_S):
        async for _ in lines:
            pass


__all__ = ["EventData"]
