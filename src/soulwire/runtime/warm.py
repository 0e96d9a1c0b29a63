"""Warming a turn's path before the first prompt: pydantic builds validators and
serializers on first use, so each front end builds the ones every turn needs (events, the
history records, tool results) while the client is still composing its first prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from soulwire.engine.context import tool_message
from soulwire.llm.message import Message
from soulwire.wire.messages import StatusUpdate, StepBegin, ToolResult, TurnBegin, TurnEnd
from soulwire.wire.types import TextPart, TokenUsage, ToolReturnValue, WireModel


def warm_turn_path(encode: Callable[[WireModel], Any], *, user_input: Any = "x") -> None:
    """Build one of every event a plain turn emits and pass it to the front end's `encode`;
    write a user and a tool history record. Tool schemas are not built here: an adapter
    builds them when it first sends them."""
    value = ToolReturnValue(is_error=False, output="x")
    for message in (
        TurnBegin(user_input=user_input),
        StepBegin(n=1),
        TextPart(text="x"),
        StatusUpdate(token_usage=TokenUsage()),
        ToolResult(tool_call_id="x", return_value=value),
        TurnEnd(),
    ):
        encode(message)
    Message(role="user", content="x").to_record()
    tool_message("x", value).to_record()


__all__ = ["warm_turn_path"]
