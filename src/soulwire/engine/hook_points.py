"""Where the engine runs hooks, and what each hook event receives (spec §4.12).

Every function takes the session's HookEngine (None: no hooks at all) and returns at once
when no hook is registered for its event, so a session without hooks pays nothing. The
payload fields follow the reference's documentation: `tool_name`, `tool_input`,
`tool_call_id`, `tool_output`, `error`, `prompt`, `stop_hook_active`, `error_type`,
`error_message`, `source`, `reason`, `trigger`, `token_count`, `estimated_token_count`
(besides `hook_event_name`, `session_id` and `cwd`, which every payload has)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from soulwire.engine.hooks import HookEngine
from soulwire.tools.base import ToolContext
from soulwire.wire.types import ToolCall, ToolReturnValue, UserInput, tool_error, user_input_text

BLOCKED_TOOL_MESSAGE = "Blocked by PreToolUse hook"
BLOCKED_PROMPT_MESSAGE = "Blocked by UserPromptSubmit hook"
_OUTPUT_CAP = 10_000


def _tool_input(call: ToolCall) -> Any:
    arguments = call.function.arguments
    if not arguments:
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _output_text(value: ToolReturnValue) -> str:
    if isinstance(value.output, str):
        return value.output[:_OUTPUT_CAP]
    texts = [getattr(p, "text", "") for p in value.output]
    return "".join(t for t in texts if isinstance(t, str))[:_OUTPUT_CAP]


RunTool = Callable[[ToolCall, ToolContext], Awaitable[ToolReturnValue]]


async def call_tool(
    hooks: HookEngine | None, tool_call: ToolCall, run: RunTool, ctx: ToolContext
) -> ToolReturnValue:
    """Run a tool call (`run(call, ctx)`) between its PreToolUse and PostToolUse hooks; a
    blocking PreToolUse hook replaces the call by an error result."""
    name = tool_call.function.name
    if hooks is None or not (
        hooks.has("PreToolUse") or hooks.has("PostToolUse") or hooks.has("PostToolUseFailure")
    ):
        return await run(tool_call, ctx)
    tool_input = _tool_input(tool_call)
    decision = await hooks.run(
        "PreToolUse", name, {"tool_name": name, "tool_input": tool_input, "tool_call_id": tool_call.id}
    )
    if decision.blocked:
        return tool_error(decision.reason or BLOCKED_TOOL_MESSAGE, brief="Hook blocked")
    if decision.updated_input is not None:  # the tool runs with the hook's arguments
        tool_input = decision.updated_input
        arguments = json.dumps(tool_input, ensure_ascii=False)
        tool_call = tool_call.model_copy(
            update={"function": tool_call.function.model_copy(update={"arguments": arguments})}
        )
    value = await run(tool_call, ctx)
    if value.is_error:
        data = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_call_id": tool_call.id,
            "error": value.message,
        }
        await hooks.run("PostToolUseFailure", name, data)
    else:
        data = {"tool_name": name, "tool_input": tool_input, "tool_call_id": tool_call.id,
                "tool_output": _output_text(value)}  # fmt: skip
        await hooks.run("PostToolUse", name, data)
    return value


async def prompt_refusal(hooks: HookEngine | None, user_input: UserInput) -> str | None:
    """Why a UserPromptSubmit hook blocked the prompt, or None when it may run."""
    if hooks is None or not hooks.has("UserPromptSubmit"):
        return None
    text = user_input_text(user_input)
    decision = await hooks.run("UserPromptSubmit", text, {"prompt": text})
    return (decision.reason or BLOCKED_PROMPT_MESSAGE) if decision.blocked else None


async def stop(hooks: HookEngine | None, *, active: bool) -> str | None:
    """Run the Stop hooks at the end of a turn; the reason to go on when one blocks with a
    reason (only while `active` is False: a turn goes on at most once)."""
    if hooks is None or not hooks.has("Stop"):
        return None
    decision = await hooks.run("Stop", "", {"stop_hook_active": active})
    return decision.reason if decision.blocked and decision.reason and not active else None


async def stop_failure(hooks: HookEngine | None, error: BaseException) -> None:
    if hooks is None or not hooks.has("StopFailure"):
        return
    kind = getattr(error, "error_type", None) or type(error).__name__
    await hooks.run("StopFailure", str(kind), {"error_type": str(kind), "error_message": str(error)})


async def compaction(hooks: HookEngine | None, when: str, trigger: str, tokens: int) -> None:
    """PreCompact (`when="Pre"`, with the current token count) or PostCompact (the estimate)."""
    event = f"{when}Compact"
    if hooks is None or not hooks.has(event):
        return
    key = "token_count" if when == "Pre" else "estimated_token_count"
    await hooks.run(event, trigger, {"trigger": trigger, key: tokens})


async def session_start(hooks: HookEngine | None, source: str) -> None:
    """SessionStart (`startup` or `resume`): outside any turn, so not announced on the wire."""
    if hooks is not None and hooks.has("SessionStart"):
        await hooks.run("SessionStart", source, {"source": source}, announce=False)


async def session_end(hooks: HookEngine | None, reason: str) -> None:
    if hooks is not None and hooks.has("SessionEnd"):
        await hooks.run("SessionEnd", reason, {"reason": reason}, announce=False)
