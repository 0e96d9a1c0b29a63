"""Encoding of server → client lines. Streaming text is the hot path: a text or think chunk
is framed by hand around one C-level string escape instead of a full model dump."""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from soulwire.wire.jsonrpc import encode
from soulwire.wire.messages import envelope
from soulwire.wire.types import TextPart, ThinkPart, WireModel

_escape: Any = encode_basestring  # escapes what JSON requires, keeps UTF-8 raw
_EVENT_HEAD = '{"jsonrpc":"2.0","method":"event","params":{'
_TEXT_PARAMS = '"type":"ContentPart","payload":{"type":"text","text":'
_THINK_PARAMS = '"type":"ContentPart","payload":{"type":"think","think":'
_TEXT_HEAD = _EVENT_HEAD + _TEXT_PARAMS
_THINK_HEAD = _EVENT_HEAD + _THINK_PARAMS


def event_line(message: WireModel) -> bytes:
    """One `event` notification line for a message."""
    cls = type(message)
    if cls is TextPart and not message.__pydantic_extra__:
        return (_TEXT_HEAD + _escape(message.text) + "}}}\n").encode()  # type: ignore[attr-defined]
    if cls is ThinkPart and not message.__pydantic_extra__:
        enc = message.encrypted  # type: ignore[attr-defined]
        tail = "null" if enc is None else _escape(enc)
        return (_THINK_HEAD + _escape(message.think) + ',"encrypted":' + tail + "}}}\n").encode()  # type: ignore[attr-defined]
    body = {"jsonrpc": "2.0", "method": "event", "params": envelope(message)}
    return (encode(body) + "\n").encode()


_NUMBERED_HEAD = _EVENT_HEAD + '"seq":'
_NUMBERED_TEXT = "," + _TEXT_PARAMS
_NUMBERED_THINK = "," + _THINK_PARAMS


def numbered_part_line(message: WireModel, seq: int) -> bytes | None:
    """The line of a streamed text or think part with `"seq":N` first in its params (the
    server's clients of the Wire extensions get that form), framed in one go; None for every
    other message."""
    cls = type(message)
    if cls is TextPart and not message.__pydantic_extra__:
        return (_NUMBERED_HEAD + str(seq) + _NUMBERED_TEXT + _escape(message.text) + "}}}\n").encode()  # type: ignore[attr-defined]
    if cls is ThinkPart and not message.__pydantic_extra__:
        enc = message.encrypted  # type: ignore[attr-defined]
        tail = "null" if enc is None else _escape(enc)
        think = _escape(message.think) + ',"encrypted":' + tail  # type: ignore[attr-defined]
        return (_NUMBERED_HEAD + str(seq) + _NUMBERED_THINK + think + "}}}\n").encode()
    return None
