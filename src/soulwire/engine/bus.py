"""The event bus: one producer (the engine), many consumers, two views of one stream.

Raw sinks see every message exactly as produced (one ContentPart per provider chunk); merged
sinks see adjacent text/think chunks folded together and ToolCallParts folded into their
ToolCall (spec §3.5). Delivery is synchronous, so a message reaches every sink before the
producer goes on: nothing is queued for a whole turn and memory stays flat while streaming."""

from __future__ import annotations

from collections.abc import Callable

from soulwire.wire.fold import Merger
from soulwire.wire.types import WireModel

Sink = Callable[[WireModel], None]


class EventBus:
    """Fan-out of engine messages to raw and merged sinks."""

    def __init__(self, *, merge_window_s: float | None = None) -> None:
        """`merge_window_s`: merged text and thinking are delivered at least this often while
        they stream (a session others follow through a shared store, live)."""
        self._raw: list[Sink] = []
        self._merged: list[Sink] = []
        self._merger = Merger(self._deliver, window_s=merge_window_s)

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
            self._merger.push(message)

    def record(self, message: WireModel) -> None:
        """Publish to merged sinks only (requests the front end delivers by itself)."""
        if self._merged:
            self.flush()
            self._deliver(message)

    def flush(self) -> None:
        """Deliver the merge buffer, if any (at step ends and before non-mergeable messages)."""
        self._merger.flush()

    def _deliver(self, message: WireModel) -> None:
        for sink in self._merged:
            sink(message)
