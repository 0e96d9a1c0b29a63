"""The one fold: streamed content parts merged into whole messages (spec §3.5).

A provider streams a reply as many small parts: text and thinking chunks, a `ToolCall`
followed by `ToolCallPart`s carrying its argument fragments. Every consumer that wants whole
messages — the engine's merged event view and its session record, the step's assistant
message, the SDK's steps, the print and terminal front ends — folds them with this module.

- `Chunks` accumulates strings without keeping every chunk alive.
- `Run` is one open run of mergeable parts.
- `Merger` folds a live stream, delivering each merged message once it cannot grow.
- `assemble` folds one step's parts into its content parts and tool calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from soulwire.wire.types import (
    CONTENT_PART_TYPES,
    FunctionCall,
    TextPart,
    ThinkPart,
    ToolCall,
    ToolCallPart,
    WireModel,
)

_JOIN_EVERY = 512

Deliver = Callable[[WireModel], None]


class Chunks:
    """Collects string chunks and joins them every few hundred, so a 100k-chunk stream costs
    about the size of its text, not 100k small objects."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def append(self, text: str) -> None:
        parts = self._parts
        parts.append(text)
        if len(parts) >= _JOIN_EVERY:
            self._parts = ["".join(parts)]

    def text(self) -> str:
        return "".join(self._parts)

    def __bool__(self) -> bool:
        return any(self._parts)


MERGEABLE = (TextPart, ThinkPart, ToolCall, ToolCallPart)
_WINDOWED = (TextPart, ThinkPart)
"""Runs a time window may cut (a tool call's arguments are recorded whole)."""


class Run:
    """One run of mergeable parts: adjacent text chunks, adjacent thinking chunks (a chunk
    carrying a signature closes the run), or a tool call with its argument fragments."""

    __slots__ = ("chunks", "encrypted", "head", "head_type")

    def __init__(self, head: WireModel) -> None:
        self.head = head
        self.head_type = type(head)
        self.chunks = Chunks()
        self.encrypted: str | None = None
        if isinstance(head, TextPart):
            self.chunks.append(head.text)
        elif isinstance(head, ThinkPart):
            self.chunks.append(head.think)
            self.encrypted = head.encrypted
        elif isinstance(head, ToolCall):
            if head.function.arguments is not None:
                self.chunks.append(head.function.arguments)
        elif isinstance(head, ToolCallPart) and head.arguments_part is not None:
            self.chunks.append(head.arguments_part)

    def absorb(self, incoming: WireModel) -> bool:
        """Add `incoming` to this run if it continues it. (The hot path of streaming: exact
        class checks, no isinstance calls; `type()` because attribute access on a model goes
        through pydantic's `__getattr__` hook.)"""
        cls = type(incoming)
        head_type = self.head_type
        if head_type is TextPart:
            if cls is TextPart:
                self.chunks.append(incoming.text)  # type: ignore[attr-defined]
                return True
        elif head_type is ThinkPart:
            if cls is ThinkPart and self.encrypted is None:
                self.chunks.append(incoming.think)  # type: ignore[attr-defined]
                self.encrypted = incoming.encrypted  # type: ignore[attr-defined]
                return True
        elif cls is ToolCallPart and (head_type is ToolCall or head_type is ToolCallPart):
            part: Any = incoming
            if part.arguments_part is not None:
                self.chunks.append(part.arguments_part)
            return True
        return False

    @property
    def is_text(self) -> bool:
        return isinstance(self.head, TextPart)

    def result(self) -> WireModel:
        """The merged message."""
        head = self.head
        text = self.chunks.text()
        if isinstance(head, TextPart):
            return TextPart(text=text)
        if isinstance(head, ThinkPart):
            return ThinkPart(think=text, encrypted=self.encrypted)
        if isinstance(head, ToolCall):
            has_args = head.function.arguments is not None or bool(self.chunks)
            function = FunctionCall(name=head.function.name, arguments=text if has_args else None)
            return ToolCall(id=head.id, function=function, extras=head.extras)
        return ToolCallPart(arguments_part=text if self.chunks else None)


class Merger:
    """Folds a live stream: `push` every raw message; merged ones reach `deliver` as soon as
    they cannot grow (the next message does not continue them, or `flush` is called)."""

    __slots__ = ("_deliver", "_opened", "_run", "_window")

    def __init__(self, deliver: Deliver, *, window_s: float | None = None) -> None:
        self._deliver = deliver
        self._run: Run | None = None
        self._window = window_s
        """Text and thinking runs older than this are delivered as they stand and a new run
        opened (a live record others read as it grows; None: runs end only by themselves)."""
        self._opened = 0.0

    def push(self, message: WireModel) -> None:
        run = self._run
        if run is not None and run.absorb(message):
            if self._window is not None and run.head_type in _WINDOWED:
                now = time.monotonic()
                if now - self._opened >= self._window:
                    self.flush()
            return
        self.flush()
        if isinstance(message, MERGEABLE):
            self._run = Run(message)
            if self._window is not None:
                self._opened = time.monotonic()
        else:
            self._deliver(message)

    def flush(self) -> None:
        """Deliver the open run, if any."""
        run, self._run = self._run, None
        if run is not None:
            self._deliver(run.result())

    @property
    def open_run(self) -> Run | None:
        """The run still growing (None between runs)."""
        return self._run


def fold(messages: Iterable[WireModel]) -> list[WireModel]:
    """The merged form of a finished stream."""
    out: list[WireModel] = []
    merger = Merger(out.append)
    for message in messages:
        merger.push(message)
    merger.flush()
    return out


def assemble(messages: Iterable[Any]) -> tuple[list[Any], list[ToolCall]]:
    """One step's reply: its content parts (text and thinking merged, media as they came) and
    its tool calls with their arguments assembled. Anything that is not a content part of a
    reply (events, requests) is left out; an argument fragment always belongs to the latest
    tool call, even when other output came between them."""
    parts: list[Any] = []
    calls: list[ToolCall] = []
    for message in fold(m for m in messages if isinstance(m, WireModel)):
        cls = type(message)
        if cls is ToolCall:
            calls.append(message)  # type: ignore[arg-type]
        elif cls is ToolCallPart:
            fragment: Any = message
            if calls and fragment.arguments_part is not None:
                last = calls[-1]
                args = (last.function.arguments or "") + fragment.arguments_part
                calls[-1] = ToolCall(
                    id=last.id,
                    function=FunctionCall(name=last.function.name, arguments=args),
                    extras=last.extras,
                )
        elif isinstance(message, CONTENT_PART_TYPES):
            parts.append(message)
    return parts, calls


def joined_text(messages: Iterable[Any]) -> str:
    """All the text of some messages (no thinking), joined."""
    return "".join(m.text for m in messages if type(m) is TextPart)


__all__ = ["MERGEABLE", "Chunks", "Merger", "Run", "assemble", "fold", "joined_text"]
