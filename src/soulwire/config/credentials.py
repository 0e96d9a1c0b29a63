"""OAuth tokens of `soulwire login` (spec §8.2 `oauth = {storage, key}`): one JSON file per key
under `<share>/credentials/`, private (0600), written atomically, refreshed shortly before they
expire by whichever process needs them first (one at a time: a lock file beside the token).
Providers and services that carry an `oauth` reference resolve their API key here.

The token endpoint is the reference platform's (`https://auth.kimi.com`), overridable by
`SOULWIRE_OAUTH_HOST` (or the reference's `KIMI_CODE_OAUTH_HOST` / `KIMI_OAUTH_HOST`) so tests and
private deployments can point it elsewhere. httpx2 is imported only when a refresh is due."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from soulwire.config.loader import share_dir
from soulwire.errors import SoulwireError

DEFAULT_OAUTH_HOST = "https://auth.kimi.com"
OAUTH_HOST_VARIABLES = ("SOULWIRE_OAUTH_HOST", "KIMI_CODE_OAUTH_HOST", "KIMI_OAUTH_HOST")
CLIENT_ID = "17e5f671-d194-4dfb-9706-5516cb48c098"
"""The public client id of the reference platform's device flow (not a secret)."""
PLATFORM_KEY = "oauth/kimi-code"
MIN_REFRESH_MARGIN_S = 300.0
"""A token is refreshed when less than max(this, half its lifetime) remains."""


class CredentialsError(SoulwireError, RuntimeError):
    """A token could not be read, refreshed or stored (one line for a person)."""


@dataclass
class Token:
    access_token: str
    refresh_token: str
    expires_at: float
    scope: str = ""
    token_type: str = "Bearer"
    expires_in: float = 0.0

    @classmethod
    def from_response(cls, payload: dict[str, Any]) -> Token:
        """A token endpoint's answer (`access_token`, `refresh_token`, `expires_in`)."""
        try:
            expires_in = float(payload.get("expires_in") or 0)
            return cls(
                access_token=str(payload["access_token"]),
                refresh_token=str(payload.get("refresh_token") or ""),
                expires_at=time.time() + expires_in if expires_in else 0.0,
                scope=str(payload.get("scope") or ""),
                token_type=str(payload.get("token_type") or "Bearer"),
                expires_in=expires_in,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CredentialsError(f"unexpected token response: {exc}") from exc

    def needs_refresh(self, now: float | None = None) -> bool:
        if not self.expires_at or not self.refresh_token:
            return False
        margin = max(MIN_REFRESH_MARGIN_S, self.expires_in * 0.5)
        return self.expires_at - (time.time() if now is None else now) < margin


def oauth_host() -> str:
    for name in OAUTH_HOST_VARIABLES:
        value = os.environ.get(name)
        if value:
            return value.rstrip("/")
    return DEFAULT_OAUTH_HOST


def credentials_path(key: str, share: Path | None = None) -> Path:
    """`oauth/kimi-code` → `<share>/credentials/kimi-code.json` (the reference's layout)."""
    name = key.removeprefix("oauth/").split("/")[-1] or "default"
    return (share or share_dir()) / "credentials" / f"{name}.json"


def load_token(key: str, share: Path | None = None) -> Token | None:
    path = credentials_path(key, share)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or not payload.get("access_token"):
        return None
    return Token(
        access_token=str(payload["access_token"]),
        refresh_token=str(payload.get("refresh_token") or ""),
        expires_at=float(payload.get("expires_at") or 0),
        scope=str(payload.get("scope") or ""),
        token_type=str(payload.get("token_type") or "Bearer"),
        expires_in=float(payload.get("expires_in") or 0),
    )


def save_token(key: str, token: Token, share: Path | None = None) -> Path:
    """Write the token file atomically with mode 0600 (its directory 0700)."""
    path = credentials_path(key, share)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(token), handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def delete_token(key: str, share: Path | None = None) -> bool:
    path = credentials_path(key, share)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed


def refresh(token: Token) -> Token:
    """Exchange the refresh token at `<host>/api/oauth/token`."""
    import httpx2

    try:
        response = httpx2.post(
            f"{oauth_host()}/api/oauth/token",
            data={
                "client_id": CLIENT_ID,
                "grant_type": "refresh_token",
                "refresh_token": token.refresh_token,
            },
            timeout=30,
        )
        payload = response.json()
    except (httpx2.HTTPError, ValueError) as exc:
        raise CredentialsError(f"token refresh failed: {exc}") from exc
    if response.status_code != 200 or not isinstance(payload, dict):
        why = payload.get("error_description") if isinstance(payload, dict) else None
        raise CredentialsError(f"token refresh failed: {why or f'HTTP {response.status_code}'}")
    fresh = Token.from_response(payload)
    if not fresh.refresh_token:
        fresh.refresh_token = token.refresh_token
    return fresh


def access_token(oauth: dict[str, Any] | None, share: Path | None = None) -> str:
    """The current access token for a config `oauth` reference, refreshed (and stored) when it
    is about to expire; "" when there is no login. A failed refresh keeps the old token: the
    service then answers 401 and the user is told to log in again."""
    if not oauth:
        return ""
    key = str(oauth.get("key") or PLATFORM_KEY)
    token = load_token(key, share)
    if token is None or not token.needs_refresh():
        return token.access_token if token is not None else ""
    # Refresh tokens are used once: two processes refreshing together would leave one of
    # them (and the file, if it writes last) with a token the server no longer accepts. So
    # one refreshes at a time, and the next reads what the first stored.
    with _refresh_lock(key, share):
        token = load_token(key, share)
        if token is None:
            return ""
        if token.needs_refresh():
            try:
                token = refresh(token)
                save_token(key, token, share)
            except CredentialsError:
                pass
    return token.access_token


@contextmanager
def _refresh_lock(key: str, share: Path | None) -> Generator[None]:
    """An exclusive lock between processes on `key`'s refresh (flock on a file beside the
    token's, released by the kernel if the holder dies)."""
    import fcntl

    path = credentials_path(key, share).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock
