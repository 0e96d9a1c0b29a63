"""Who may talk to the server: a bearer token on every request, and Host / Origin checks so a
web page elsewhere (cross-site, or through DNS rebinding) cannot drive a local server.

The token is generated at the first start and kept (0600) in the share dir. Browsers cannot
set headers on a WebSocket, so there it may come as a `token` query parameter or as a
`soulwire.token.<TOKEN>` subprotocol. Checks run as plain ASGI middleware, before routing."""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from soulwire.sessions.jsonl import ensure_private_dir

TOKEN_FILE = "server-token"
TOKEN_SUBPROTOCOL_PREFIX = "soulwire.token."
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def load_or_create_token(share: Path) -> tuple[str, bool]:
    """(the server token, whether it was created just now)."""
    path = share / TOKEN_FILE
    try:
        token = path.read_text(encoding="ascii").strip()
        if token:
            return token, False
    except FileNotFoundError:
        pass
    ensure_private_dir(share)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token, True


@dataclass
class Guard:
    """The token and the Host / Origin values this server answers to."""

    token: str
    hosts: set[str]
    origins: set[str] = field(default_factory=set[str])
    observer_tokens: dict[str, str] = field(default_factory=dict[str, str])
    """Read-only tokens minted per session: token → session id."""

    @classmethod
    def for_listen(cls, token: str, host: str, port: int | list[int], extra_hosts: list[str]) -> Guard:
        """The guard of a server on `host`:`port` (or on each of several ports: forked copies
        that share one app)."""
        ports = port if isinstance(port, list) else [port]
        names = {"127.0.0.1", "localhost", "[::1]", *(h.lower() for h in extra_hosts)}
        if host not in ("0.0.0.0", "::"):  # a wildcard is no name: --allow-host gives them
            names.add(f"[{host}]" if ":" in host else host)
        hosts = {f"{n}:{p}" for n in names for p in ports}
        hosts |= names if any(p in (80, 443) for p in ports) else set()
        origins = {f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")}
        return cls(token, hosts, origins)

    def token_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def observer_session(self, offered: str | None) -> str | None:
        if offered is None:
            return None
        for token, session in self.observer_tokens.items():
            if hmac.compare_digest(offered.encode(), token.encode()):
                return session
        return None


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (latin-1, as ASGI gives bytes), or None."""
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


def offered_token(scope: Scope) -> str | None:
    """The token a request carries: Authorization header, `token` query, or subprotocol."""
    auth = header(scope, b"authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0]
    for proto in (header(scope, b"sec-websocket-protocol") or "").split(","):
        proto = proto.strip()
        if proto.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return proto[len(TOKEN_SUBPROTOCOL_PREFIX) :]
    return None


class GuardMiddleware:
    """Refuses (403) a foreign Host or Origin and (401) a missing or wrong token. An observer
    token passes only for its own session's WebSocket as an observer, and its GETs."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = header(scope, b"host")
        if host is None or host.lower() not in self.guard.hosts:
            await _refuse(scope, receive, send, 403, "this server does not answer to that Host")
            return
        origin = header(scope, b"origin")
        if origin is not None and origin.lower().rstrip("/") not in self.guard.origins:
            await _refuse(scope, receive, send, 403, "cross-origin requests are refused")
            return
        offered = offered_token(scope)
        if self.guard.token_matches(offered):
            scope.setdefault("state", {})["role"] = "full"
            await self.app(scope, receive, send)
            return
        observed = self.guard.observer_session(offered)
        if observed is not None and _observer_may(scope, observed):
            scope.setdefault("state", {})["role"] = "observer"
            await self.app(scope, receive, send)
            return
        await _refuse(scope, receive, send, 401, "a valid bearer token is required")


def _observer_may(scope: Scope, session_id: str) -> bool:
    path = urlsplit(scope.get("path", "")).path
    if scope["type"] == "websocket":
        return path == f"/ws/sessions/{session_id}"
    return scope.get("method") == "GET" and path.startswith(f"/api/sessions/{session_id}")


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, reason: str) -> None:
    body = ('{"detail":"' + reason + '"}').encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="soulwire"'))
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await receive()  # websocket.connect
    if "websocket.http.response" in (scope.get("extensions") or {}):
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": reason})


__all__ = ["TOKEN_FILE", "Guard", "GuardMiddleware", "load_or_create_token", "offered_token"]
