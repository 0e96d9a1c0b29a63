"""The root of the engine side's exceptions (configuration, providers, tools, sessions, the
engine, the faces, the server, the fleet and the commands): `except SoulwireError` catches
every error Soulwire itself raises, beside the built-in bases some keep (`ValueError`, …)
for callers that catch those. The other public surfaces have their own root: `WireError`
(`soulwire.wire.jsonrpc`) and `SDKError` (`soulwire.sdk`). A leaf: it imports nothing."""

from __future__ import annotations


class SoulwireError(Exception):
    """An error raised by Soulwire's engine side."""


__all__ = ["SoulwireError"]
