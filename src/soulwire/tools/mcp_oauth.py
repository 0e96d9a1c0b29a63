"""OAuth for HTTP MCP servers added with `auth = "oauth"` (`soulwire mcp add --auth oauth`),
through the official `mcp` SDK's client auth (discovery, dynamic registration, PKCE, refresh).

Tokens and the registered client live in `<share>/mcp-oauth/<hash of the URL>.json` (0600, in a
0700 directory), with the absolute expiry time so that a later process refreshes them before
they run out. `soulwire mcp auth NAME` runs the browser flow with a one-shot callback listener
on 127.0.0.1; a session never opens a browser: a server that needs a new authorization is
reported as `unauthorized` with the command to run."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from soulwire.errors import SoulwireError

REFRESH_MARGIN_S = 60.0
"""A stored token with less than this left counts as expired: it is refreshed before use."""
CLIENT_NAME = "soulwire"


class AuthorizationRequired(SoulwireError):
    """The server needs the browser flow; a session cannot run it."""

    def __init__(self) -> None:
        super().__init__("authorization required")


def token_path(share: Path, server_url: str) -> Path:
    digest = hashlib.sha256(server_url.rstrip("/").encode()).hexdigest()[:24]
    return share / "mcp-oauth" / f"{digest}.json"


class FileTokenStorage:
    """The SDK's `TokenStorage` over one private JSON file per server URL."""

    def __init__(self, share: Path, server_url: str) -> None:
        self.path = token_path(share, server_url)
        self.server_url = server_url.rstrip("/")

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.path.parent, 0o700)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({**data, "server_url": self.server_url}, handle)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def has_tokens(self) -> bool:
        return bool(self._read().get("tokens"))

    def clear(self) -> bool:
        existed = self.path.exists()
        self.path.unlink(missing_ok=True)
        return existed

    async def get_tokens(self) -> Any:
        """The stored tokens; with the access token left out once it has (nearly) expired.

        The SDK's token model carries no expiry of its own (only `expires_in`, relative to
        when it was issued), and its provider takes any stored access token as valid. An
        expired one is therefore not handed over: the provider then refreshes it with the
        refresh token before the first request, through its public flow, rather than sending
        a token the server would refuse."""
        from mcp.shared.auth import OAuthToken

        data = self._read()
        raw = data.get("tokens")
        if not raw:
            return None
        tokens = OAuthToken.model_validate(raw)
        expires_at = data.get("expires_at")
        if isinstance(expires_at, int | float) and time.time() >= expires_at - REFRESH_MARGIN_S:
            tokens.access_token = ""
        return tokens

    async def set_tokens(self, tokens: Any) -> None:
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in else None
        self._write(data)

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self._read().get("client_info")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: Any) -> None:
        data = self._read()
        data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)


async def _no_browser(_url: str) -> None:
    raise AuthorizationRequired


async def _no_callback() -> Any:
    raise AuthorizationRequired


def oauth_provider(
    share: Path,
    server_url: str,
    *,
    redirect_uri: str = "http://127.0.0.1:1/callback",
    redirect_handler: Callable[[str], Awaitable[None]] | None = None,
    callback_handler: Callable[[], Awaitable[Any]] | None = None,
) -> Any:
    """An `httpx2.Auth` for the server. Without handlers (a session) a needed browser flow
    raises AuthorizationRequired instead of waiting for a person."""
    import logging

    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    # The SDK logs every failed flow with a traceback; ours is reported as one line instead.
    quiet = logging.getLogger("mcp.client.auth")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    storage = FileTokenStorage(share, server_url)
    metadata = OAuthClientMetadata.model_validate(
        {
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=redirect_handler or _no_browser,
        callback_handler=callback_handler or _no_callback,
    )
