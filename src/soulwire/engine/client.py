"""The engine's view of the connected client: something that answers requests."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import ValidationError

from soulwire.engine.bus import EventBus
from soulwire.errors import SoulwireError
from soulwire.wire.messages import ToolCallRequest, ToolResultAnswer
from soulwire.wire.types import ToolReturnValue, WireModel, tool_error


class ClientRequestError(SoulwireError):
    """The client answered a request with a JSON-RPC error, went away (`closed`), or cannot
    receive this kind of request at all (`unsupported`: it did not declare the protocol
    version or capability that introduced it; nothing was sent)."""

    def __init__(self, message: str, *, closed: bool = False, unsupported: bool = False) -> None:
        super().__init__(message)
        self.closed = closed
        self.unsupported = unsupported


class ClientChannel(Protocol):
    """Sends a request (ApprovalRequest, ToolCallRequest, …) and waits for the result."""

    async def request(self, message: WireModel) -> Any: ...


class ExternalToolCaller:
    """Runs client-implemented tools through ToolCallRequest (recorded in wire.jsonl)."""

    def __init__(self, channel: ClientChannel, bus: EventBus) -> None:
        self._channel = channel
        self._bus = bus

    async def call_external(self, tool_call_id: str, name: str, arguments: str | None) -> ToolReturnValue:
        request = ToolCallRequest(id=tool_call_id, name=name, arguments=arguments)
        self._bus.record(request)
        try:
            result = await self._channel.request(request)
        except ClientRequestError as exc:
            if exc.closed:
                return tool_error(
                    "Wire connection closed before tool result was received.", brief="Wire closed"
                )
            return tool_error(str(exc), brief="External tool error")
        try:
            return ToolResultAnswer.model_validate(result).return_value
        except (ValidationError, TypeError, ValueError):
            return tool_error("Invalid tool result payload from client.", brief="Invalid tool result")
