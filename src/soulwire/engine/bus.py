"""The event bus: one producer (the engine), many consumers, two views of one stream.

Raw sinks see every message exactly as produced (one ContentPart per provider chunk); merged
sinks see adjacent text/think chunks folded together and ToolCallParts folded into their
ToolCall (spec §3.5). Delivery is synchronous, so a message reaches every sink before the
producer goes on: nothing is queued for a whole turn and memory stays flat while streaming."""

from __future__ import annotations

from collections.abc import Callable

from soulwire.engine.chunks import Chunks
from soulwire.wire.types import FunctionCall, TextPart, ThinkPart, ToolCall, ToolCallPart, WireModel

Sink = Callable[[WireModel], None]


class _Fold:
    """The one-slot merge buffer."""

    __slots__ = ("chunks", "encrypted", "head")

    def __init__(self, head: WireModel) -> None:
        self.head = head
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
        head = self.head
        if isinstance(head, TextPart):
            if type(incoming) is TextPart:
                self.chunks.append(incoming.text)
                return True
        elif isinstance(head, ThinkPart):
            if type(incoming) is ThinkPart and self.encrypted is None:
                self.chunks.append(incoming.think)
                self.encrypted = incoming.encrypted
                return True
        elif isinstance(head, ToolCall | ToolCallPart) and type(incoming) is ToolCallPart:
            if incoming.arguments_part is not None:
                self.chunks.append(incoming.arguments_part)
            return True
        return False

    def result(self) -> WireModel:
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


_MERGEABLE = (TextPart, ThinkPart, ToolCall, ToolCallPart)


class EventBus:
    """Fan-out of engine messages to raw and merged sinks."""

    def __init__(self) -> None:
        self._raw: list[Sink] = []
        self._merged: list[Sink] = []
        self._fold: _Fold | None = None

    def subscribe(self, sink: Sink, *, merged: bool = False) -> Callable[[], None]:
        """Add a sink; returns a function that removes it."""
        target = self._merged if merged else self._raw
        target.append(sink)
        return lambda: target.remove(sink) if sink in target else None

    def emit(self, message: WireModel) -> None:
        """Publish a message to raw sinks now and to merged sinks once it cannot grow."""
        for sink in self._raw:
            sink(message)
        if self._merged:
            self._merge(message)

    def record(self, message: WireModel) -> None:
        """Publish to merged sinks only (requests the front end delivers by itself)."""
        if self._merged:
            self.flush()
            self._deliver(message)

    def flush(self) -> None:
        """Deliver the merge buffer, if any (at step ends and before non-mergeable messages)."""
        fold, self._fold = self._fold, None
        if fold is not None:
            self._deliver(fold.result())

    def _merge(self, message: WireModel) -> None:
        if self._fold is not None and self._fold.absorb(message):
            return
        self.flush()
        if isinstance(message, _MERGEABLE):
            self._fold = _Fold(message)
        else:
            self._deliver(message)

    def _deliver(self, message: WireModel) -> None:
        for sink in self._merged:
            sink(message)
