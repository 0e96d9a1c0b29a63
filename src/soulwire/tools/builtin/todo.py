"""`SetTodoList`: the model's visible plan for the task, kept with the session."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.wire.types import TodoDisplayBlock, TodoItem, ToolReturnValue, tool_ok

TODOS_KEY = "todos"
"""Where the list lives in the session state (`ctx.state`, persisted with the session)."""


class Todo(ToolParams):
    title: str = Field(min_length=1, description="What to do, in a few words.")
    status: Literal["pending", "in_progress", "done"] = Field(description="Where the item stands.")


class SetTodoListParams(ToolParams):
    todos: list[Todo] | None = Field(
        default=None,
        description="The complete new list (it replaces the old one). Omit it to get the current list back.",
    )


def current_todos(state: dict[str, Any]) -> list[dict[str, str]]:
    stored = state.get(TODOS_KEY)
    return stored if isinstance(stored, list) else []


class SetTodoList(TypedTool[SetTodoListParams]):
    name = "SetTodoList"
    description = (
        "Keep a todo list for multi-step work so the user can follow progress. Send the whole "
        "list each time with every item's status (pending, in_progress, done); call it without "
        "`todos` to read the current list."
    )
    params = SetTodoListParams

    async def execute(self, params: SetTodoListParams, ctx: ToolContext) -> ToolReturnValue:
        if params.todos is None:
            items = current_todos(ctx.state)
            if not items:
                return tool_ok(output="The todo list is empty.")
            lines = [f"- [{item.get('status', '')}] {item.get('title', '')}" for item in items]
            return tool_ok(output="Current todo list:\n" + "\n".join(lines))
        items = [todo.model_dump() for todo in params.todos]
        ctx.state[TODOS_KEY] = items
        block = TodoDisplayBlock(items=[TodoItem.model_validate(item) for item in items])
        return tool_ok(output="Todo list updated", message="Todo list updated", display=[block])
