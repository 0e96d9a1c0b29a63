"""The raw SSE reader of the Chat Completions adapter (soulwire/llm/sse.py): events split on
blank lines however the bytes arrive, CRLF and CR line ends, comments, multi-line data, an
error event, a stream without `[DONE]`, and what comes after `[DONE]` read but not yielded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from soulwire.llm.sse import EventData


class Failed(Exception):
    pass


class FakeResponse:
    """An `httpx2.Response` as the SDK's `post(..., stream=True)` returns it: unread."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.read_to_end = False
        self.exited = False

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        self.read_to_end = True

    async def aclose(self) -> None:
        self.exited = True


def read(chunks: list[bytes]) -> tuple[list[Any], FakeResponse]:
    response = FakeResponse(chunks)

    async def send() -> FakeResponse:
        return response

    async def main() -> list[Any]:
        async with EventData(send, lambda body: Failed(body)) as events:
            return [data async for data in events]

    return anyio.run(main), response


def split_everywhere(text: bytes) -> list[bytes]:
    return [text[i : i + 1] for i in range(len(text))]


STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"id": "a", "n": 1}\n\n'
    b'event: message\r\ndata: {"n":\r\ndata: 2}\r\n\r\n'
    b'data: {"n": 3}\r\r'
    b"data: [DONE]\n\n"
    b'data: {"n": "after done"}\n\n'
)


@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_events_however_the_bytes_arrive(split: bool) -> None:
    events, response = read(split_everywhere(STREAM) if split else [STREAM])
    assert events == [{"id": "a", "n": 1}, {"n": 2}, {"n": 3}]
    assert response.read_to_end and response.exited  # the body read to its end: the connection is reusable


def test_a_stream_that_ends_without_done_or_a_last_blank_line() -> None:
    events, _ = read([b'data: {"n": 1}\n\ndata: {"n": 2}'])
    assert events == [{"n": 1}, {"n": 2}]


@pytest.mark.parametrize(
    "stream",
    [b'event: error\ndata: {"message": "overloaded"}\n\n', b'data: {"error": {"code": 529}}\n\n'],
    ids=["error-event", "error-member"],
)
def test_an_error_event_raises_what_on_error_makes(stream: bytes) -> None:
    with pytest.raises(Failed) as caught:
        read([b'data: {"n": 1}\n\n' + stream])
    assert caught.value.args[0] in ({"message": "overloaded"}, {"error": {"code": 529}})


def test_undecodable_data_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        read([b"data: {not json\n\n"])
