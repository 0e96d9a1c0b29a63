"""The names a client and the engine or server it starts agree on outside the protocol's
messages: environment variables and well-known files. One definition here, in the leaf both
distributions ship, so the SDK, the fleet, the front ends, the CLI and the server cannot
spell them differently."""

from __future__ import annotations

from collections.abc import Mapping

SHARE_DIR_ENV = ("SOULWIRE_SHARE_DIR", "KIMI_SHARE_DIR")
"""The engine's data directory (config.toml, sessions, credentials, the server's token): the
first one set wins; kimi's name is read too, so kimi's clients keep working."""

SERVER_TOKEN_ENV = "SOULWIRE_SERVER_TOKEN"
"""A `serve`'s token: what the server takes when no --token-file is given, and what its
clients (`acp --connect`, `web`, `serve drain`) send when no token is given to them."""

SERVER_TOKEN_FILE = "server-token"
"""The file in the share dir where a local `serve` keeps the token it generated."""


def share_dir_from(env: Mapping[str, str]) -> str | None:
    """The share dir `env` names (`SHARE_DIR_ENV`), unexpanded; None when it names none."""
    return next((env[key] for key in SHARE_DIR_ENV if env.get(key)), None)


__all__ = ["SERVER_TOKEN_ENV", "SERVER_TOKEN_FILE", "SHARE_DIR_ENV", "share_dir_from"]
