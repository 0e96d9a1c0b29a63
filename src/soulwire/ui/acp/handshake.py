"""The ACP `initialize` exchange, stdlib only: the start-up path answers it before the SDK
and the engine are loaded (they take most of a second to import), and the server answers
every later `initialize` from the same code."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from soulwire import __version__
from soulwire.runtime.options import SessionOptions
from soulwire.ui.acp.stdio import error_message, result_message

PROTOCOL_VERSION = 1
"""The ACP protocol version this agent speaks (the only stable one)."""

_CAPABILITY_ENV = ("SOULWIRE_MODEL_CAPABILITIES", "KIMI_MODEL_CAPABILITIES")


class HandshakeError(ValueError):
    """The `initialize` params are unusable (answered with -32602)."""


@dataclass
class ClientCapabilities:
    """What the editor said it can do for the agent."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    name: str = ""

    @classmethod
    def parse(cls, params: Any) -> ClientCapabilities:
        """Read `clientCapabilities` / `clientInfo` from `initialize` params."""
        if not isinstance(params, dict):
            raise HandshakeError("initialize params must be an object")
        version = params.get("protocolVersion")  # pyright: ignore[reportUnknownMemberType]
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise HandshakeError("protocolVersion must be a non-negative integer")
        caps: Any = params.get("clientCapabilities") or {}  # pyright: ignore[reportUnknownMemberType]
        fs: Any = caps.get("fs") if isinstance(caps, dict) else None  # pyright: ignore[reportUnknownMemberType]
        fs = fs if isinstance(fs, dict) else {}
        info: Any = params.get("clientInfo")  # pyright: ignore[reportUnknownMemberType]
        return cls(
            read_text_file=fs.get("readTextFile") is True,  # pyright: ignore[reportUnknownMemberType]
            write_text_file=fs.get("writeTextFile") is True,  # pyright: ignore[reportUnknownMemberType]
            terminal=isinstance(caps, dict) and caps.get("terminal") is True,  # pyright: ignore[reportUnknownMemberType]
            name=str(info.get("name") or "") if isinstance(info, dict) else "",  # pyright: ignore[reportUnknownMemberType]
        )


def model_capabilities(raw_config: dict[str, Any], model_alias: str | None) -> set[str]:
    """The chosen model's declared capabilities, read from the raw configuration and the
    environment without loading the engine (enough to advertise prompt capabilities)."""
    for name in _CAPABILITY_ENV:
        text = os.environ.get(name)
        if text:
            return {c.strip() for c in text.split(",") if c.strip()}
    models = raw_config.get("models")
    alias = model_alias or raw_config.get("default_model")
    entry: Any = models.get(alias) if isinstance(models, dict) and isinstance(alias, str) else None  # pyright: ignore[reportUnknownMemberType]
    caps: Any = entry.get("capabilities") if isinstance(entry, dict) else None  # pyright: ignore[reportUnknownMemberType]
    return {str(c) for c in caps} if isinstance(caps, list) else set()  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def initialize_result(capabilities: set[str]) -> dict[str, Any]:
    """The `initialize` result (camelCase, as on the wire). No auth methods: models are
    configured with keys in config.toml or the environment, there is nothing to log in to."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {
                "image": "image_in" in capabilities,
                "audio": "audio_in" in capabilities,
                "embeddedContext": True,
            },
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "additionalDirectories": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "soulwire", "title": "Soulwire", "version": __version__},
    }


class Handshake:
    """Answers `initialize` (also later ones, through the transport) and keeps what the
    editor declared."""

    def __init__(self, options: SessionOptions) -> None:
        self.capabilities = model_capabilities(options.raw_config, options.model_alias)
        self.client = ClientCapabilities()

    def __call__(self, request_id: Any, params: Any) -> dict[str, Any]:
        try:
            self.client = ClientCapabilities.parse(params)
        except HandshakeError as exc:
            return error_message(request_id, -32602, "Invalid params", {"details": str(exc)})
        return result_message(request_id, initialize_result(self.capabilities))
