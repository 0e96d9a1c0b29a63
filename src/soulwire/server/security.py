"""Who may talk to the server: a bearer token on every request, and Host / Origin checks so a
web page elsewhere (cross-site, or through DNS rebinding) cannot drive a local server.

The token is generated at the first start and kept (0600) in the share dir. Browsers cannot
set headers on a WebSocket, so there it may come as a `token` query parameter or as a
`soulwire.token.<TOKEN>` subprotocol. Checks run as plain ASGI middleware, before routing.
With named users defined (server/users.py) a token names its user instead, and the single
token is refused: `scope["state"]["user"]` says who, server/access.py what they may do."""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from soulwire.sessions.jsonl import ensure_private_dir
from soulwire.wire.environment import SERVER_TOKEN_FILE

if TYPE_CHECKING:
    from soulwire.server.users import Directory

TOKEN_SUBPROTOCOL_PREFIX = "soulwire.token."
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def load_or_create_token(share: Path) -> tuple[str, bool]:
    """(the server token, whether it was created just now)."""
    path = share / SERVER_TOKEN_FILE
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
    users: Directory | None = None
    """The named users, where the server has a place for them (None: the single token only)."""
    draining: Callable[[], bool] = lambda: False
    """The replica hands its sessions over (server/handover.py): health checks fail."""

    @classmethod
    def for_listen(cls, token: str, host: str, port: int | list[int], extra_hosts: list[str]) -> Guard:
        """The guard of a server on `host`:`port` (or on each of several ports: forked copies
        that share one app)."""
        ports = port if isinstance(port, list) else [port]
        extra = {h.lower() for h in extra_hosts}
        # NAME:PORT names the address clients use as it is (a proxy in front, on its own port;
        # on 80 or 443 clients send the bare NAME); a bare NAME goes with this server's ports.
        given = {h for h in extra if re.fullmatch(r"(\[[^\]]+\]|[^:\[\]]+):\d+", h)}
        given |= {h.rpartition(":")[0] for h in given if h.endswith((":80", ":443"))}
        names = {"127.0.0.1", "localhost", "[::1]", *(extra - given)}
        if host not in ("0.0.0.0", "::"):  # a wildcard is no name: --allow-host gives them
            names.add(f"[{host}]" if ":" in host else host)
        hosts = {f"{n}:{p}" for n in names for p in ports} | given
        hosts |= names if any(p in (80, 443) for p in ports) else set()
        origins = {f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")}
        return cls(token, hosts, origins)

    def token_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    async def knows(self, offered: str | None) -> bool:
        """A token that opens this server: a user's where users are defined, else the token."""
        if self.users is not None:
            await self.users.refresh()
            if self.users.active:
                return await self.users.authenticate(offered) is not None
        return self.token_matches(offered)

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
        if kind == "http" and scope.get("path") == HEALTH_PATH and scope.get("method") in ("GET", "HEAD"):
            # A load balancer's health check carries no token; the answer tells nothing else.
            if self.guard.draining():
                await _answer(send, 503, b"draining\n", b"text/plain")
            else:
                await _answer(send, 200, b"ok\n", b"text/plain")
            return
        host = header(scope, b"host")
        if host is None or host.lower() not in self.guard.hosts:
            await refuse(scope, receive, send, 403, "this server does not answer to that Host")
            return
        origin = header(scope, b"origin")
        if origin is not None and origin.lower().rstrip("/") not in self.guard.origins:
            await refuse(scope, receive, send, 403, "cross-origin requests are refused")
            return
        offered = offered_token(scope)
        users = self.guard.users
        if users is not None:
            await users.refresh()
        if users is not None and users.active:
            user = await users.authenticate(offered)
            if user is not None:
                state = scope.setdefault("state", {})
                state["role"], state["user"] = ("full" if user.drives else "observer"), user
                await self.app(scope, receive, send)
                return
        elif self.guard.token_matches(offered):
            scope.setdefault("state", {})["role"] = "full"
            await self.app(scope, receive, send)
            return
        observed = self.guard.observer_session(offered)
        if observed is not None and _observer_may(scope, observed):
            scope.setdefault("state", {})["role"] = "observer"
            await self.app(scope, receive, send)
            return
        needed = (
            "a user's token is required (this server has named users)" if users and users.active else None
        )
        await refuse(scope, receive, send, 401, needed or "a valid bearer token is required")


def _observer_may(scope: Scope, session_id: str) -> bool:
    path = urlsplit(scope.get("path", "")).path
    if scope["type"] == "websocket":
        return path == f"/ws/sessions/{session_id}"
    return scope.get("method") == "GET" and path.startswith(f"/api/sessions/{session_id}")


HEALTH_PATH = "/healthz"
"""Answered 200 without a token (HAProxy's checks, server/haproxy.py)."""


async def _answer(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def refuse(scope: Scope, receive: Receive, send: Send, status: int, reason: str) -> None:
    """Answer `status` with `{"detail": reason}` (before the handshake, for a WebSocket)."""
    body = json.dumps({"detail": reason}).encode()
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


__all__ = [
    "Guard",
    "GuardMiddleware",
    "load_or_create_token",
    "offered_token",
    "refuse",
]
