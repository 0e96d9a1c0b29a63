"""The ACP `initialize` exchange, stdlib only: the start-up path answers it before the SDK
and the engine are loaded (they take most of a second to import), and the server answers
every later `initialize` from the same code."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from soulwire import __version__
from soulwire.errors import SoulwireError
from soulwire.runtime.options import SessionOptions
from soulwire.ui.acp import v2
from soulwire.ui.acp.stdio import error_message, result_message

PROTOCOL_VERSION = 1
"""The ACP protocol version this agent speaks (the only stable one; v2 alpha: ui/acp/v2.py)."""

KIMI_CODE = "kimi-code"
TERMINAL_LOGIN = "terminal-login"


def auth_methods(*, terminal: bool) -> list[dict[str, Any]]:
    """`authMethods` of the `initialize` result (camelCase, as on the wire)."""
    methods: list[dict[str, Any]] = [
        {
            "id": KIMI_CODE,
            "name": "Kimi Code",
            "description": "Log in with your Kimi Code account (the browser opens to confirm)",
        }
    ]
    if terminal:
        methods.append(
            {
                "id": TERMINAL_LOGIN,
                "name": "Log in in a terminal",
                "description": "Kimi Code, or an API key of another provider (checked before it is saved)",
                "type": "terminal",
                "args": ["login"],
            }
        )
    return methods


class HandshakeError(SoulwireError, ValueError):
    """The `initialize` params are unusable (answered with -32602)."""


@dataclass
class ClientCapabilities:
    """What the editor said it can do for the agent."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    auth_terminal: bool = False
    """The editor can run `soulwire acp login` in a terminal (`auth.terminal`)."""
    redraw: bool = False
    """Soulwire's extension (`_meta.soulwire.redraw`): the editor clears a session's view on
    the `_soulwire/redraw` notification and draws the replay that follows (after a rewind)."""
    name: str = ""
    protocol_version: int = PROTOCOL_VERSION
    """The version of the connection (2 only with the v2 alpha on and asked for: ui/acp/v2.py)."""

    @property
    def v2(self) -> bool:
        return self.protocol_version >= v2.VERSION

    @classmethod
    def parse(cls, params: Any) -> ClientCapabilities:
        """Read `clientCapabilities` / `clientInfo` from `initialize` params."""
        if not isinstance(params, dict):
            raise HandshakeError("initialize params must be an object")
        version = params.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise HandshakeError("protocolVersion must be a non-negative integer")
        caps: Any = params.get("clientCapabilities") or {}
        fs: Any = caps.get("fs") if isinstance(caps, dict) else None
        fs = fs if isinstance(fs, dict) else {}
        info: Any = params.get("clientInfo")
        auth: Any = caps.get("auth") if isinstance(caps, dict) else None
        meta: Any = caps.get("_meta") if isinstance(caps, dict) else None
        ours: Any = meta.get("soulwire") if isinstance(meta, dict) else None
        negotiated = v2.negotiate(version)
        v1 = negotiated < v2.VERSION  # v2 has no client fs/terminal methods: the tools use the disk
        return cls(
            read_text_file=v1 and fs.get("readTextFile") is True,
            write_text_file=v1 and fs.get("writeTextFile") is True,
            terminal=v1 and isinstance(caps, dict) and caps.get("terminal") is True,
            auth_terminal=isinstance(auth, dict) and auth.get("terminal") is True,
            redraw=isinstance(ours, dict) and ours.get("redraw") is True,
            name=str(info.get("name") or "") if isinstance(info, dict) else "",
            protocol_version=negotiated,
        )


def model_capabilities(raw_config: dict[str, Any], model_alias: str | None) -> set[str]:
    """The chosen model's declared capabilities, read from the raw configuration and the
    environment without loading the engine (enough to advertise prompt capabilities)."""
    from soulwire.llm.env import capability_list, capability_variables, env_provider_type  # (stdlib only)

    models = raw_config.get("models")
    alias = model_alias or raw_config.get("default_model")
    entry: Any = models.get(alias) if isinstance(models, dict) and isinstance(alias, str) else None
    # `KIMI_MODEL_CAPABILITIES` is for a `kimi` provider only, as the engine applies it
    kind = _provider_type(raw_config, entry) if isinstance(entry, dict) else env_provider_type(os.environ)
    for name in capability_variables(kind):
        text = os.environ.get(name)
        if text:
            return set(capability_list(text))
    caps: Any = entry.get("capabilities") if isinstance(entry, dict) else None
    return {str(c) for c in caps} if isinstance(caps, list) else set()


def _provider_type(raw_config: dict[str, Any], model: dict[str, Any]) -> str | None:
    providers = raw_config.get("providers")
    name = model.get("provider")
    provider: Any = providers.get(name) if isinstance(providers, dict) and isinstance(name, str) else None
    kind = provider.get("type") if isinstance(provider, dict) else None
    return kind if isinstance(kind, str) else None


def initialize_result(capabilities: set[str], client: ClientCapabilities | None = None) -> dict[str, Any]:
    """The `initialize` result (camelCase, as on the wire). The auth methods are Soulwire's
    login (see `auth`); a terminal one only for an editor that can run it."""
    terminal = client is not None and client.auth_terminal
    result: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {
                "image": "image_in" in capabilities,
                "audio": "audio_in" in capabilities,
                "embeddedContext": True,
            },
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {
                "list": {},
                "delete": {},
                "resume": {},
                "close": {},
                "fork": {},  # unstable in v1: clients that do not know it ignore it
                "additionalDirectories": {},
            },
            "auth": {"logout": {}},
            "_meta": {"soulwire": {"redraw": True}},  # offered: see ClientCapabilities.redraw
        },
        "authMethods": auth_methods(terminal=terminal),
        "agentInfo": {"name": "soulwire", "title": "Soulwire", "version": __version__},
    }
    return v2.adapt_initialize(result) if client is not None and client.v2 else result


class Handshake:
    """Answers `initialize` (also later ones, through the transport) and keeps what the
    editor declared."""

    def __init__(self, options: SessionOptions) -> None:
        self.capabilities = model_capabilities(options.raw_config, options.model)
        self.client = ClientCapabilities()

    def __call__(self, request_id: Any, params: Any) -> dict[str, Any]:
        try:
            self.client = ClientCapabilities.parse(params)
        except HandshakeError as exc:
            return error_message(request_id, -32602, "Invalid params", {"details": str(exc)})
        return result_message(request_id, initialize_result(self.capabilities, self.client))
