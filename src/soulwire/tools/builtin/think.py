"""`Think`: a place for the model to reason in the open; nothing happens."""

from __future__ import annotations

from pydantic import Field

from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.wire.types import ToolReturnValue, tool_ok


class ThinkParams(ToolParams):
    thought: str = Field(description="The reasoning to note down.")


class Think(TypedTool[ThinkParams]):
    name = "Think"
    description = (
        "Note down reasoning (planning the next steps, weighing options, checking a result) "
        "without acting. It changes nothing and returns nothing."
    )
    params = ThinkParams

    async def execute(self, params: ThinkParams, ctx: ToolContext) -> ToolReturnValue:
        return tool_ok(message="Thought logged")
