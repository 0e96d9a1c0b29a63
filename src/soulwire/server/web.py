"""The web app's front door: its static files (shipped in the package, no CDN), the exchange of
the URL token for an HttpOnly SameSite cookie, and the security headers of every response.

Plain ASGI middleware around the server's guard. The app shell (`/web/…`: HTML, CSS, ES
modules) holds no data, so it is served without a token (its Host is still checked); every
data request goes on to the guard, with the cookie turned into the bearer token it stands for.
The cookie is `SameSite=Strict` and the guard refuses foreign Origins, so another site can
neither read nor drive the server through it."""

from __future__ import annotations

import hashlib
import mimetypes
from http.cookies import SimpleCookie
from importlib import resources
from urllib.parse import parse_qs, quote

from soulwire.server.security import ASGIApp, Guard, Receive, Scope, Send, header

COOKIE = "soulwire_token"
WEB_PREFIX = "/web/"
LOGIN_PATH = "/web/login"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def content_security_policy(host: str) -> str:
    """Scripts, styles and fonts from this server only; no inline script, no eval, no frames;
    images may be data:/blob: (pasted images, uploads); WebSocket to this host only."""
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data: blob:",
            "font-src 'self'",
            f"connect-src 'self' ws://{host} wss://{host}",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ]
    )


def _cookie_token(scope: Scope) -> str | None:
    raw = header(scope, b"cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header is no token
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


_cache: dict[str, tuple[bytes, str] | None] = {}


def _static_file(relative: str) -> tuple[bytes, str] | None:
    """A file of the packaged app (`soulwire/server/static/…`) and its ETag, or None; read once."""
    if relative in _cache:
        return _cache[relative]
    parts = [p for p in relative.split("/") if p]
    found: tuple[bytes, str] | None = None
    if parts and not any(p.startswith(".") for p in parts):
        node = resources.files("soulwire.server").joinpath("static", *parts)
        try:
            if node.is_file():
                body = node.read_bytes()
                found = (body, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')
        except OSError:
            pass
    if len(_cache) < 256:
        _cache[relative] = found
    return found


class WebMiddleware:
    """Serves `/web/…`, exchanges `?token=` for the cookie, adds security headers, and hands
    every other request to the guard with the cookie's token as its bearer token."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = (header(scope, b"host") or "").lower()
        path: str = scope.get("path", "")
        if kind == "http" and host in self.guard.hosts and scope.get("method") in ("GET", "HEAD"):
            if path == LOGIN_PATH or (path == "/" and self._browser_login(scope)):
                await self._login(scope, send, host)
                return
            if path == "/web" or path.startswith(WEB_PREFIX):
                await self._static(path, send, host, header(scope, b"if-none-match"))
                return
        cookie = _cookie_token(scope)
        if cookie is not None and header(scope, b"authorization") is None:
            headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or ())
            headers.append((b"authorization", f"Bearer {cookie}".encode("latin-1")))
            scope = {**scope, "headers": headers}
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        security = self._security_headers(host)

        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                existing = list(message.get("headers") or [])  # type: ignore[arg-type]
                message = {**message, "headers": existing + security}
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]

    @staticmethod
    def _browser_login(scope: Scope) -> bool:
        """A browser opening the URL `soulwire serve` printed (`/?token=…`), or coming back with
        its cookie; API clients (a bearer header, no HTML wanted) still get the JSON index."""
        if "text/html" not in (header(scope, b"accept") or "") or header(scope, b"authorization"):
            return False
        return b"token=" in scope.get("query_string", b"") or _cookie_token(scope) is not None

    def _security_headers(self, host: str) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-security-policy", content_security_policy(host).encode("latin-1")),
            (b"x-content-type-options", b"nosniff"),
            (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY"),
            (b"cross-origin-opener-policy", b"same-origin"),
        ]

    async def _login(self, scope: Scope, send: Send, host: str) -> None:
        """`?token=T&next=/web/#…`: a right token becomes the cookie and the browser is sent on
        (303, so the token leaves the address bar and the history at once)."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        token = (query.get("token") or [None])[0]
        target = (query.get("next") or [WEB_PREFIX])[0]
        if not target.startswith(WEB_PREFIX):  # never redirect off this server
            target = WEB_PREFIX
        headers = [*self._security_headers(host), (b"cache-control", b"no-store")]
        if token is None and _cookie_token(scope) is not None:
            headers.append((b"location", quote(target, safe="/#?&=:").encode("latin-1")))
            await _respond(send, 303, headers, b"")
            return
        if not await self.guard.knows(token):
            body = b"<!doctype html><title>Soulwire</title><p>This link's token is missing or wrong."
            headers.append((b"content-type", b"text/html; charset=utf-8"))
            await _respond(send, 401, headers, body)
            return
        assert token is not None
        cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
        headers += [
            (b"set-cookie", cookie.encode("latin-1")),
            (b"location", quote(target, safe="/#?&=:").encode("latin-1")),
        ]
        await _respond(send, 303, headers, b"")

    async def _static(self, path: str, send: Send, host: str, if_none_match: str | None) -> None:
        relative = path[len(WEB_PREFIX) :] if path.startswith(WEB_PREFIX) else ""
        if relative in ("", "index.html", "vis"):
            relative = "index.html"
        found = _static_file(relative)
        headers = self._security_headers(host)
        if found is None:
            headers.append((b"content-type", b"text/plain; charset=utf-8"))
            await _respond(send, 404, headers, b"not found")
            return
        body, etag = found
        headers += [(b"etag", etag.encode()), (b"cache-control", b"no-cache")]
        if if_none_match == etag:  # revalidated: the browser keeps its copy
            await _respond(send, 304, headers, b"")
            return
        suffix = relative[relative.rfind(".") :]
        mime = _TYPES.get(suffix) or mimetypes.guess_type(relative)[0] or "application/octet-stream"
        charset = "; charset=utf-8" if mime.startswith("text/") or mime.endswith("javascript") else ""
        headers.append((b"content-type", f"{mime}{charset}".encode()))
        await _respond(send, 200, headers, body)


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["COOKIE", "LOGIN_PATH", "WebMiddleware", "content_security_policy"]
