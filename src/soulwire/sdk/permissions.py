"""`can_use_tool`: a permission callback in the style of other agent SDKs, on top of Wire
approval requests.

    async def can_use_tool(name: str, input: dict[str, Any] | None, context: ToolPermissionContext):
        if name == "Shell" and "rm -rf" in (input or {}).get("command", ""):
            return Deny("not here")
        return Allow()

`Allow()` approves the call once; `Deny(reason)` rejects it, and the reason is told to the
model (which may try something else); `Deny(reason, interrupt=True)` stops the turn.

Why `Allow(updated_input=...)` is refused here: an engine asks for approval from inside the
tool, after it has parsed the input and worked out the action (the command, the file
outside the work dir, the diff). The Wire answer is yes or no, and the running tool cannot
start over with other input. So the SDK rejects the call (the model is told why, an error is
logged) rather than run input the callback did not approve. To change a call's input, use a
`PreToolUse` hook returning `Allow(updated_input=...)` (`soulwire.sdk.hooks`): it runs
before the tool starts, and any approval is then asked about the amended input."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio.to_thread

from soulwire.sdk.approvals import ApprovalDecision
from soulwire.sdk.messages import parse_tool_input

if TYPE_CHECKING:
    from soulwire.sdk.approvals import Approval

log = logging.getLogger("soulwire.sdk")

UPDATED_INPUT_REFUSED = (
    "the client's permission callback asked to change this tool call's input, which Wire "
    "approvals cannot carry (a PreToolUse hook can); the call was not run"
)


@dataclass(frozen=True)
class Allow:
    """Run the tool. `for_session` also approves the same action for the rest of the session.
    `updated_input` is not supported over Wire (see the module docstring)."""

    updated_input: dict[str, Any] | None = None
    for_session: bool = False


@dataclass(frozen=True)
class Deny:
    """Do not run the tool; `reason` is told to the model. With `interrupt`, the turn stops
    (the engine is sent a plain reject)."""

    reason: str = ""
    interrupt: bool = False


PermissionResult: TypeAlias = Allow | Deny


@dataclass(frozen=True)
class ToolPermissionContext:
    """What else is known about the call: the engine's request (action and description as
    the engine words them, display blocks) and the raw `Approval`."""

    tool_call_id: str
    action: str
    description: str
    display: list[Any]
    approval: Approval


CanUseTool: TypeAlias = Callable[
    [str, "dict[str, Any] | None", ToolPermissionContext], PermissionResult | Awaitable[PermissionResult]
]


def to_approval_decision(result: Any) -> ApprovalDecision:
    """The Wire answer for what a `can_use_tool` callback returned."""
    if isinstance(result, Deny):
        if result.interrupt:
            return ApprovalDecision.reject()
        return ApprovalDecision.reject(result.reason or "the client denied this tool call")
    if isinstance(result, Allow):
        if result.updated_input is not None:
            log.error("can_use_tool returned Allow(updated_input=...): %s", UPDATED_INPUT_REFUSED)
            return ApprovalDecision.reject(UPDATED_INPUT_REFUSED)
        return ApprovalDecision.approve_for_session() if result.for_session else ApprovalDecision.approve()
    raise TypeError(f"can_use_tool returned {result!r}; expected Allow(...) or Deny(...)")


class PermissionAdapter:
    """An `on_approval` callback that asks a `can_use_tool` callback."""

    def __init__(self, callback: CanUseTool) -> None:
        self.callback = callback

    async def __call__(self, approval: Approval) -> ApprovalDecision:
        call = approval.tool_call
        name = call.function.name if call is not None else approval.sender
        arguments = call.function.arguments if call is not None else None
        context = ToolPermissionContext(
            tool_call_id=approval.tool_call_id,
            action=approval.action,
            description=approval.description,
            display=approval.display,
            approval=approval,
        )
        tool_input = parse_tool_input(arguments)
        callback: Any = self.callback
        if _is_async(callback):
            result: Any = await callback(name, tool_input, context)
        else:  # may ask a human: off the event loop, like on_approval
            result = await anyio.to_thread.run_sync(
                functools.partial(callback, name, tool_input, context), abandon_on_cancel=True
            )
            if inspect.isawaitable(result):
                result = await result
        return to_approval_decision(result)


def _is_async(callback: Callable[..., Any]) -> bool:
    method = getattr(callback, "__call__", None)  # noqa: B004 -- async callable objects count
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(method)


__all__ = [
    "UPDATED_INPUT_REFUSED",
    "Allow",
    "CanUseTool",
    "Deny",
    "PermissionAdapter",
    "PermissionResult",
    "ToolPermissionContext",
    "to_approval_decision",
]
