"""The provider protocol every adapter implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from soulwire.llm.message import Message
from soulwire.wire.types import TokenUsage, WireModel


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ChatRequest:
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
    as they arrive and fills `result`; errors are `soulwire.llm.errors.ChatProviderError`."""

    @property
    def model_name(self) -> str: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    def stream(self, request: ChatRequest, result: StreamResult) -> AsyncIterator[WireModel]: ...
