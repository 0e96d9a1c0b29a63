"""The provider protocol every adapter implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from soulwire.llm.message import Message
from soulwire.wire.types import TokenUsage, WireModel


class ToolSpec:
    """A tool as offered to the model.

    `parameters` may be given as a function returning the JSON Schema: generating schemas
    is a start-up cost (pydantic's schema generator, every tool), so it is paid when an
    adapter first reads them, and never by a provider that does not send them."""

    __slots__ = ("_parameters", "description", "name")

    def __init__(
        self, name: str, description: str, parameters: dict[str, Any] | Callable[[], dict[str, Any]]
    ) -> None:
        self.name = name
        self.description = description
        self._parameters = parameters

    @property
    def parameters(self) -> dict[str, Any]:
        if callable(self._parameters):
            self._parameters = self._parameters()
        return self._parameters

    def __repr__(self) -> str:
        return f"ToolSpec(name={self.name!r})"


class ChatRequest(NamedTuple):
    system_prompt: str
    history: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    thinking: bool = False


@dataclass
class StreamResult:
    """Filled in by the stream while it runs; read once it is exhausted."""

    usage: TokenUsage | None = None
    message_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)


class ChatProvider(Protocol):
    """A chat model. `stream` yields wire parts (text/think/media parts, ToolCall, ToolCallPart)
    as they arrive and fills `result`; errors are `soulwire.llm.errors.ProviderError`."""

    @property
    def model_name(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def stream(self, request: ChatRequest, result: StreamResult) -> AsyncIterator[WireModel]: ...

    async def aclose(self) -> None:
        """Close what the provider holds open (its HTTP client's connections). The session that
        owns it calls this when it ends; a later `stream` would open them again."""
        ...


@runtime_checkable
class Preloadable(Protocol):
    """A provider whose first request would wait for slow set-up (importing an official SDK
    and building its client: 0.5 to 1.5 s). `preload` does it now; it may run in any thread."""

    def preload(self) -> None: ...
