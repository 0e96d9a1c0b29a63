"""The `initialize` exchange, on plain JSON values (no pydantic), so that the lean start-up
path and the full server answer it with the same code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soulwire import __version__
from soulwire.wire import PROTOCOL_VERSION

SERVER_NAME = "Soulwire"
SERVER_CAPABILITIES: dict[str, bool] = {"supports_question": True, "supports_plan_mode": True}
BASELINE_VERSION = (1, 3)
"""Event types up to this version are sent to every client, declared version or not."""


def parse_version(text: Any) -> tuple[int, int] | None:
    if not isinstance(text, str):
        return None
    head = text.strip().split(".")
    try:
        return int(head[0]), int(head[1]) if len(head) > 1 else 0
    except ValueError:
        return None


@dataclass
class ClientHello:
    """What a client told us in `initialize`."""

    protocol_version: tuple[int, int] = BASELINE_VERSION
    client: dict[str, Any] | None = None
    supports_question: bool = False
    supports_plan_mode: bool = False
    supports_checkpoints: bool = False
    """Negotiated workspace checkpoints (wire/checkpoints.py): their event and methods."""
    supports_budget: bool = False
    """Budget events and the `budget_exceeded` prompt status (wire/budget.py)."""
    supports_model_switch: bool = False
    """`set_model` and the `ModelChanged` event (wire/model_switch.py)."""
    external_tools: list[dict[str, Any]] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    declared_capabilities: bool = False

    def event_ceiling(self) -> tuple[int, int]:
        """The newest protocol version whose event types this client may receive.

        A client that only sends our own version back — no `client`, no `capabilities`, no
        hooks — is treated as a 1.3 client: that is how the Go SDK initialises (it copies
        `wire_protocol_version` from `info --json`), and it stops reading at the first event
        type it does not know."""
        echoed = self.protocol_version == parse_version(PROTOCOL_VERSION)
        if echoed and self.client is None and not self.declared_capabilities and not self.hooks:
            return BASELINE_VERSION
        return max(self.protocol_version, BASELINE_VERSION)


def _plain_hook(hook: Any) -> bool:
    if not isinstance(hook, dict):
        return False
    timeout = hook.get("timeout")
    return (
        isinstance(hook.get("id"), str)
        and isinstance(hook.get("event"), str)
        and isinstance(hook.get("matcher", ""), str)
        and (timeout is None or (isinstance(timeout, int | float) and not isinstance(timeout, bool)))
    )


def lean_hello(params: Any) -> ClientHello | None:
    """The hello of an `initialize` whose params are plainly well formed and need no engine
    (no external tools), checked without pydantic for the fast start-up path; None for
    anything else, which the full server validates (and, if need be, refuses with a -32602
    naming the field). Never accepts what `InitializeParams` would refuse."""
    if not isinstance(params, dict) or not isinstance(params.get("protocol_version"), str):
        return None
    raw: dict[str, Any] = params
    if any(raw.get(key) is not None for key in ("external_tools", "budget", "prices")):
        return None
    client = raw.get("client")
    if client is not None and not (
        isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and (client.get("version") is None or isinstance(client.get("version"), str))
    ):
        return None
    capabilities = raw.get("capabilities")
    if capabilities is not None:
        if not isinstance(capabilities, dict):
            return None
        if capabilities.get("supports_checkpoints") is not None:
            return None  # an extension: answered by the engine, which knows whether it is on
        for key in ("supports_question", "supports_plan_mode", "supports_budget", "supports_model_switch"):
            if key in capabilities and not isinstance(capabilities[key], bool):
                return None
    hooks = raw.get("hooks")
    if hooks is not None and not (isinstance(hooks, list) and all(_plain_hook(h) for h in hooks)):
        return None
    caps: dict[str, Any] = capabilities or {}
    return ClientHello(
        protocol_version=parse_version(raw["protocol_version"]) or BASELINE_VERSION,
        client=client,
        supports_question=caps.get("supports_question") is True,
        supports_plan_mode=caps.get("supports_plan_mode") is True,
        supports_budget=caps.get("supports_budget") is True,
        supports_model_switch=caps.get("supports_model_switch") is True,
        hooks=list(hooks or []),
        declared_capabilities="capabilities" in raw,
    )


def hello_from_params(params: Any) -> ClientHello:
    """The hello of validated `InitializeParams`."""
    caps = params.capabilities
    return ClientHello(
        protocol_version=parse_version(params.protocol_version) or BASELINE_VERSION,
        client=params.client.model_dump() if params.client is not None else None,
        supports_question=bool(caps and caps.supports_question),
        supports_plan_mode=bool(caps and caps.supports_plan_mode),
        supports_checkpoints=bool(caps and caps.supports_checkpoints),
        supports_budget=bool(caps and caps.supports_budget),
        supports_model_switch=bool(caps and caps.supports_model_switch),
        external_tools=[t.model_dump() for t in params.external_tools or []],
        hooks=[h.model_dump() for h in params.hooks or []],
        declared_capabilities="capabilities" in params.model_fields_set,
    )


def initialize_result(
    *,
    slash_commands: list[dict[str, Any]],
    session: dict[str, Any],
    hooks: dict[str, Any],
    external: tuple[list[str], list[dict[str, str]]] | None = None,
    extensions: dict[str, bool] | None = None,
    budget: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `initialize` result (key order as the reference's); `external_tools` only when
    tools were submitted; `session` is soulwire's own addition; `extensions`: capabilities the
    client negotiated (only those, so that other clients see today's answer); `budget` (the
    budget and what was spent) for a client that declared `supports_budget`."""
    result: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": SERVER_NAME, "version": __version__},
        "slash_commands": slash_commands,
    }
    if external is not None and (external[0] or external[1]):
        result["external_tools"] = {"accepted": external[0], "rejected": external[1]}
    result["hooks"] = hooks
    result["capabilities"] = {**SERVER_CAPABILITIES, **(extensions or {})}
    result["session"] = session
    if budget is not None:
        result["capabilities"]["supports_budget"] = True
        result["budget"] = budget
    return result


__all__ = ["ClientHello", "hello_from_params", "initialize_result", "lean_hello", "parse_version"]
