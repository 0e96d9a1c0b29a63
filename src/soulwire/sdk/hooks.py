"""Hooks as Python callables, on top of Wire hook subscriptions (`initialize.hooks`, then a
`HookRequest` each time the engine reaches the hook point).

    async def no_secrets(event: HookEvent):
        if ".env" in (event.tool_input or {}).get("path", ""):
            return Deny("secrets stay private")

    async def quiet_shell(event: HookEvent):
        command = (event.tool_input or {}).get("command", "")
        return Allow(updated_input={"command": command + " 2>/dev/null"})

    Options(hooks=[Hook("PreToolUse", no_secrets, matcher="ReadFile"),
                   Hook("PreToolUse", quiet_shell, matcher="^Shell$")])
    Options(hooks={"Stop": check_done})              # event -> callable (or a list of them)

A callback receives a `HookEvent` and returns None or `Allow()` (go on), `Deny(reason)`
(block: a tool call becomes an error result telling the model `reason`, a prompt is
refused, a `Stop` hook makes the agent continue with `reason` as its next instruction),
or, for `PreToolUse` only, `Allow(updated_input={...})`: the tool runs with those
arguments. That last one is a Soulwire extension of `HookResponse`; an engine that does
not announce it (`initialize` result `hooks.updated_input`, e.g. `kimi`) would silently
run the original input, so the SDK blocks the call instead and says why.

A callback that raises blocks `PreToolUse` and `UserPromptSubmit` (a broken guard must not
let everything through) and allows every other event. The engine waits at most the hook's
`timeout` seconds for the answer, then goes on as if allowed."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from soulwire.sdk.approvals import run_callback
from soulwire.sdk.errors import ConfigurationError
from soulwire.sdk.permissions import Allow, Deny
from soulwire.wire.hook_events import HOOK_EVENTS

log = logging.getLogger("soulwire.sdk")

HookCallback: TypeAlias = Callable[["HookEvent"], Any]
"""`(HookEvent) -> None | Allow | Deny`, sync or async (sync ones run in a worker thread)."""
FAIL_CLOSED = frozenset({"PreToolUse", "UserPromptSubmit"})
AMEND_UNSUPPORTED = (
    "a client hook asked to change the input here, which this engine cannot do (its `initialize` "
    "result does not list this event in hooks.updated_input), so it was blocked instead"
)


@dataclass(frozen=True)
class HookEvent:
    """One hook point reached by the engine. `data` is the engine's payload (`input_data`):
    `tool_name`, `tool_input`, `tool_call_id`, `tool_output`, `error`, `prompt`,
    `stop_hook_active`, `trigger`, `token_count`, `agent_name`, … depending on the event."""

    event: str
    target: str
    data: dict[str, Any]
    request_id: str = ""
    subscription_id: str = ""

    @property
    def session_id(self) -> str | None:
        value = self.data.get("session_id")
        return value if isinstance(value, str) else None

    @property
    def tool_name(self) -> str | None:
        value = self.data.get("tool_name")
        return value if isinstance(value, str) else None

    @property
    def tool_input(self) -> dict[str, Any] | None:
        value = self.data.get("tool_input")
        return value if isinstance(value, dict) else None

    @property
    def prompt(self) -> str | None:
        value = self.data.get("prompt")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Hook:
    """A callback for one hook `event` (a name of `HOOK_EVENTS`). `matcher` is a regular
    expression the engine applies to the target (the tool name for tool hooks, the prompt
    text for `UserPromptSubmit`, the trigger for `PreCompact`, the agent name for sub-agent
    hooks); empty matches everything. `timeout` (seconds, 1-600) bounds the engine's wait."""

    event: str
    callback: HookCallback
    matcher: str = ""
    timeout: float = 30.0
    id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.event not in HOOK_EVENTS:
            raise ConfigurationError(f"unknown hook event {self.event!r}; known: {', '.join(HOOK_EVENTS)}")
        if not callable(self.callback):
            raise ConfigurationError(f"the {self.event} hook is not callable: {self.callback!r}")
        timeout: Any = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= 600:
            raise ConfigurationError(f"hook timeout must be 1..600 seconds, not {timeout!r}")

    def subscription(self) -> dict[str, Any]:
        """The entry for `initialize.hooks`."""
        return {"id": self.id, "event": self.event, "matcher": self.matcher, "timeout": self.timeout}


HooksOption: TypeAlias = "Iterable[Hook] | Mapping[str, HookCallback | Iterable[HookCallback | Hook]]"


def as_hooks(value: Any) -> list[Hook]:
    """`Options.hooks` as a list of Hooks with their subscription ids (`h1`, `h2`, …)."""
    if value is None:
        return []
    items: list[Hook] = []
    if isinstance(value, Mapping):
        for event, entry in value.items():
            entries: Any = [entry] if callable(entry) or isinstance(entry, Hook) else entry
            for one in entries:
                if isinstance(one, Hook):
                    if one.event != event:
                        raise ConfigurationError(f"a {one.event} Hook is listed under {event!r}")
                    items.append(one)
                else:
                    items.append(Hook(str(event), one))
    else:
        for one in value:
            if not isinstance(one, Hook):
                raise ConfigurationError(
                    f"hooks must be Hook objects or a mapping event -> callable, not {one!r}"
                )
            items.append(one)
    return [Hook(h.event, h.callback, h.matcher, h.timeout, id=f"h{n}") for n, h in enumerate(items, 1)]


def tool_filter(allowed: Sequence[str] | None, disallowed: Sequence[str]) -> Hook | None:
    """A PreToolUse hook enforcing `Options.allowed_tools` / `disallowed_tools` (patterns
    that must match the whole tool name); None when there is nothing to enforce."""
    if allowed is None and not disallowed:
        return None
    allow = [re.compile(p) for p in allowed] if allowed is not None else None
    deny = [re.compile(p) for p in disallowed]

    async def check(event: HookEvent) -> Deny | None:
        name = event.tool_name or event.target
        if any(p.fullmatch(name) for p in deny) or (
            allow is not None and not any(p.fullmatch(name) for p in allow)
        ):
            return Deny(f"the tool `{name}` is not allowed in this session")
        return None

    return Hook("PreToolUse", check)


class HookDispatcher:
    """Answers the engine's `HookRequest`s with the session's hooks."""

    def __init__(self, hooks: list[Hook]) -> None:
        self.by_id = {h.id: h for h in hooks}
        self.amendable: frozenset[str] = frozenset()
        """Events whose answers may carry `updated_input` (from the `initialize` result)."""

    def subscriptions(self) -> list[dict[str, Any]]:
        return [h.subscription() for h in self.by_id.values()]

    async def answer(self, request_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The `HookResponse` for one request (never raises, except cancellation)."""
        reply_id = str(payload.get("id") or request_id)
        hook = self.by_id.get(str(payload.get("subscription_id") or ""))
        if hook is None:
            return {"request_id": reply_id, "action": "allow"}
        data = payload.get("input_data")
        event = HookEvent(
            event=str(payload.get("event") or hook.event),
            target=str(payload.get("target") or ""),
            data=data if isinstance(data, dict) else {},
            request_id=reply_id,
            subscription_id=hook.id,
        )
        try:
            result = await run_callback(hook.callback, event)
        except Exception as exc:
            log.exception("the %s hook failed", event.event)
            if event.event in FAIL_CLOSED:
                return {
                    "request_id": reply_id,
                    "action": "block",
                    "reason": f"the client's hook failed: {exc}",
                }
            return {"request_id": reply_id, "action": "allow"}
        return self._response(reply_id, event, result)

    def _response(self, reply_id: str, event: HookEvent, result: Any) -> dict[str, Any]:
        if result is None:
            return {"request_id": reply_id, "action": "allow"}
        if isinstance(result, Deny):
            return {"request_id": reply_id, "action": "block", "reason": result.reason}
        if isinstance(result, Allow):
            if result.updated_input is None:
                return {"request_id": reply_id, "action": "allow"}
            if event.event not in self.amendable:
                log.error("a %s hook returned Allow(updated_input=...): %s", event.event, AMEND_UNSUPPORTED)
                return {"request_id": reply_id, "action": "block", "reason": AMEND_UNSUPPORTED}
            return {"request_id": reply_id, "action": "allow", "updated_input": dict(result.updated_input)}
        log.error(
            "the %s hook returned %r; expected None, Allow(...) or Deny(...): allowing", event.event, result
        )
        return {"request_id": reply_id, "action": "allow"}


__all__ = ["HOOK_EVENTS", "Hook", "HookCallback", "HookDispatcher", "HookEvent", "as_hooks", "tool_filter"]
