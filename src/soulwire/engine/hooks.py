"""Hooks (spec §4.12): user commands from `[[hooks]]` in the config and client subscriptions
from `initialize` that run at points of a turn and may allow or block what happens next.

A shell hook receives the event as JSON on stdin; exit code 2 blocks (its stderr, else
stdout, is the reason), anything else allows — a hook that fails or times out never blocks
(fail-open). A client hook is a `HookRequest`; an error or no answer within its timeout
allows. Matching hooks of one event run in parallel between `HookTriggered` and
`HookResolved`."""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, NamedTuple, Protocol

import anyio

from soulwire.config.model import HookConfig
from soulwire.engine.bus import EventBus
from soulwire.engine.catalog import describe_hooks
from soulwire.engine.client import ClientChannel, ClientRequestError
from soulwire.wire.hook_events import AMENDABLE_EVENTS, HOOK_EVENTS
from soulwire.wire.messages import HookRequest, HookResolved, HookTriggered

Action = Literal["allow", "block"]


class CommandOutcome(Protocol):
    """How a hook's command ended (see `soulwire.tools.commands`)."""

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdout(self) -> bytes: ...

    @property
    def stderr(self) -> bytes: ...


CommandRunner = Callable[[str, bytes, float, str], Awaitable[CommandOutcome]]
"""(command, stdin, timeout, cwd) → outcome; raises OSError when it cannot start. The
runtime gives the hook engine the tools layer's runner: the engine starts no process itself."""


class HookDecision(NamedTuple):
    action: Action = "allow"
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    """Soulwire extension (`initialize` result `hooks.updated_input`): a client's PreToolUse
    hook may allow the call with new arguments."""

    @property
    def blocked(self) -> bool:
        return self.action == "block"


class Hook(NamedTuple):
    """One hook: a shell `command`, or a client `subscription_id`."""

    event: str
    matcher: str = ""
    timeout: float = 30
    command: str | None = None
    subscription_id: str | None = None

    @classmethod
    def from_config(cls, entry: HookConfig) -> Hook:
        return cls(event=entry.event, matcher=entry.matcher, timeout=entry.timeout, command=entry.command)

    def matches(self, target: str) -> bool:
        if not self.matcher:
            return True
        try:
            return re.search(self.matcher, target) is not None
        except re.error:
            return self.matcher == target


class HookEngine:
    """Runs the hooks of an event and publishes what they decided."""

    def __init__(
        self,
        hooks: Sequence[Hook] = (),
        *,
        bus: EventBus,
        session_id: str,
        work_dir: str,
        channel: ClientChannel | None = None,
        run_command: CommandRunner | None = None,
    ) -> None:
        self._run_command_with = run_command
        self._configured = [h for h in hooks if h.event in HOOK_EVENTS]
        self._subscribed: list[Hook] = []
        self._bus = bus
        self._session_id = session_id
        self._work_dir = work_dir
        self.channel = channel

    def subscribe(self, subscriptions: Sequence[dict[str, Any]]) -> None:
        """Add client subscriptions from `initialize`; unknown events are dropped."""
        for sub in subscriptions:
            event, sub_id = sub.get("event"), sub.get("id")
            if event not in HOOK_EVENTS or not isinstance(sub_id, str):
                continue
            timeout = sub.get("timeout", 30)
            self._subscribed.append(
                Hook(
                    event=str(event),
                    matcher=str(sub.get("matcher") or ""),
                    timeout=float(timeout) if isinstance(timeout, int | float) else 30.0,
                    subscription_id=sub_id,
                )
            )

    def describe(self) -> dict[str, Any]:
        """The `hooks` entry of the `initialize` result (configured hooks and subscriptions)."""
        return describe_hooks(h.event for h in (*self._configured, *self._subscribed))

    async def _run_command(self, command: str, payload: dict[str, Any], timeout: float) -> HookDecision:
        """Run a shell hook with the payload on stdin; exit code 2 blocks (stderr is the
        reason), anything else — failures included — allows (fail-open)."""
        if self._run_command_with is None:
            return HookDecision()
        stdin = json.dumps(payload, ensure_ascii=False).encode()
        try:
            outcome = await self._run_command_with(command, stdin, timeout, self._work_dir)
        except OSError:
            return HookDecision()
        if outcome.returncode == 2:
            reason = (outcome.stderr or outcome.stdout).decode("utf-8", "replace").strip()
            return HookDecision("block", reason)
        return HookDecision()

    def has(self, event: str) -> bool:
        return any(h.event == event for h in (*self._configured, *self._subscribed))

    async def run(
        self, event: str, target: str = "", data: dict[str, Any] | None = None, *, announce: bool = True
    ) -> HookDecision:
        """Run every hook of `event` matching `target`; blocked if any of them blocks.
        `announce=False` runs them without HookTriggered/HookResolved (outside a turn)."""
        hooks = self._matching(event, target)
        if not hooks:
            return HookDecision()
        if announce:
            self._bus.emit(HookTriggered(event=event, target=target, hook_count=len(hooks)))
        started = time.monotonic()
        payload = {"hook_event_name": event, "event": event, "session_id": self._session_id,
                   "cwd": self._work_dir, "target": target, **(data or {})}  # fmt: skip
        decisions: list[HookDecision] = [HookDecision()] * len(hooks)

        async def run_one(index: int, hook: Hook) -> None:
            decisions[index] = await self._run_hook(hook, payload)

        async with anyio.create_task_group() as group:
            for index, hook in enumerate(hooks):
                group.start_soon(run_one, index, hook)
        blocked = next((d for d in decisions if d.blocked), None)
        # Hooks run in parallel on the same input: the last hook (in order) that amends wins.
        amended = next((d for d in reversed(decisions) if d.updated_input is not None), None)
        decision = blocked or amended or HookDecision()
        if announce:
            self._bus.emit(
                HookResolved(
                    event=event,
                    target=target,
                    action=decision.action,
                    reason=decision.reason,
                    duration_ms=int((time.monotonic() - started) * 1000),
                )
            )
        return decision

    def _matching(self, event: str, target: str) -> list[Hook]:
        """The hooks to run; configured entries with the same command run once."""
        hooks: list[Hook] = []
        commands: set[str] = set()
        for hook in (*self._configured, *self._subscribed):
            if hook.event != event or not hook.matches(target):
                continue
            if hook.command is not None:
                if hook.command in commands:
                    continue
                commands.add(hook.command)
            hooks.append(hook)
        return hooks

    async def _run_hook(self, hook: Hook, payload: dict[str, Any]) -> HookDecision:
        if hook.command is not None:
            return await self._run_command(hook.command, payload, hook.timeout)
        if self.channel is None or hook.subscription_id is None:
            return HookDecision()
        request = HookRequest(
            id=secrets.token_hex(6),
            subscription_id=hook.subscription_id,
            event=str(payload["event"]),
            target=str(payload.get("target", "")),
            input_data=payload,
        )
        with anyio.move_on_after(hook.timeout):
            try:
                answer = await self.channel.request(request)
            except ClientRequestError:
                return HookDecision()
            if isinstance(answer, dict) and answer.get("action") == "block":
                return HookDecision("block", str(answer.get("reason") or ""))
            updated: Any = answer.get("updated_input") if isinstance(answer, dict) else None
            if isinstance(updated, dict) and hook.event in AMENDABLE_EVENTS:
                return HookDecision(updated_input=updated)
        return HookDecision()
