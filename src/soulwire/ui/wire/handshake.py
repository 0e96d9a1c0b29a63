"""The `initialize` exchange, on plain JSON values (no pydantic), so that the lean start-up
path and the full server answer it with the same code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soulwire import __version__
from soulwire.wire import PROTOCOL_VERSION
from soulwire.wire.jsonrpc import RPCError, invalid_params

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


def _object_list(value: Any, method: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise invalid_params(method)
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


def parse_initialize(params: Any) -> ClientHello:
    """Validate `initialize` params; raises RPCError(-32602) when they do not fit."""
    method = "initialize"
    if not isinstance(params, dict) or not isinstance(params.get("protocol_version"), str):
        raise invalid_params(method)
    raw: dict[str, Any] = params  # pyright: ignore[reportUnknownVariableType]
    client = raw.get("client")
    if client is not None and (not isinstance(client, dict) or not isinstance(client.get("name"), str)):
        raise invalid_params(method)
    capabilities = raw.get("capabilities") or {}
    if not isinstance(capabilities, dict):
        raise invalid_params(method)
    tools = _object_list(raw.get("external_tools"), method)
    for tool in tools:
        if not isinstance(tool.get("name"), str) or not isinstance(tool.get("parameters", {}), dict):
            raise invalid_params(method)
        if not isinstance(tool.get("description", ""), str):
            raise invalid_params(method)
    hooks = _object_list(raw.get("hooks"), method)
    return ClientHello(
        protocol_version=parse_version(raw["protocol_version"]) or BASELINE_VERSION,
        client=client,  # pyright: ignore[reportUnknownArgumentType]
        supports_question=bool(capabilities.get("supports_question")),  # pyright: ignore[reportUnknownMemberType]
        supports_plan_mode=bool(capabilities.get("supports_plan_mode")),  # pyright: ignore[reportUnknownMemberType]
        external_tools=tools,
        hooks=hooks,
        declared_capabilities="capabilities" in raw,
    )


def initialize_result(
    *,
    slash_commands: list[dict[str, Any]],
    session: dict[str, Any],
    hooks: dict[str, Any],
    external: tuple[list[str], list[dict[str, str]]] | None = None,
) -> dict[str, Any]:
    """The `initialize` result (key order as the reference's); `external_tools` only when
    tools were submitted; `session` is soulwire's own addition."""
    result: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": SERVER_NAME, "version": __version__},
        "slash_commands": slash_commands,
    }
    if external is not None and (external[0] or external[1]):
        result["external_tools"] = {"accepted": external[0], "rejected": external[1]}
    result["hooks"] = hooks
    result["capabilities"] = dict(SERVER_CAPABILITIES)
    result["session"] = session
    return result


__all__ = ["ClientHello", "RPCError", "initialize_result", "parse_initialize", "parse_version"]
