"""A fake of the reference platform's services on 127.0.0.1, for the login, search and fetch
tests: the OAuth device flow (`/api/oauth/device_authorization`, `/api/oauth/token`), the model
list (`/v1/models`), the search service (`/search`) and the fetch service (`/fetch`).

Every request is recorded (path, headers, form or JSON body). Tokens are issued as
`access-N` / `refresh-N`; only the newest access token is accepted by the model list, search
and fetch. The device code is approved after `pending_polls` polls answered
`authorization_pending`. The API key `sk-good` is accepted too (the guided setup's tests), and
`/v1/chat/completions` streams one short answer naming the key it was called with."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Stream:
    """A Chat Completions stream of one text answer."""

    text: str

    def encode(self) -> bytes:
        def chunk(delta: dict[str, Any], finish: str | None) -> str:
            body = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(body)}\n\n"

        return (
            chunk({"role": "assistant", "content": self.text}, None) + chunk({}, "stop") + "data: [DONE]\n\n"
        ).encode()


@dataclass
class FakePlatform:
    pending_polls: int = 1
    expires_in: int = 3600
    models: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {
                "id": "kimi-for-coding",
                "context_length": 262144,
                "supports_reasoning": True,
                "supports_image_in": True,
                "supports_video_in": False,
                "display_name": "Kimi For Coding",
            }
        ]
    )
    requests: list[Seen] = field(default_factory=list[Seen])
    issued: int = 0
    polls: int = 0
    hold_refreshes: threading.Event | None = None
    """When set, a refresh request is recorded, then answered only once this event is set."""
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    @property
    def access_token(self) -> str:
        return f"access-{self.issued}"

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def _issue(self) -> dict[str, Any]:
        self.issued += 1
        return {
            "access_token": f"access-{self.issued}",
            "refresh_token": f"refresh-{self.issued}",
            "expires_in": self.expires_in,
            "token_type": "Bearer",
            "scope": "kimi-code",
        }

    def handle(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append(Seen(path, headers, body))
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        authorized = (bearer == self.access_token and self.issued > 0) or bearer == "sk-good"
        if path == "/api/oauth/device_authorization":
            return 200, {
                "device_code": "dev-1",
                "user_code": "ABCD-1234",
                "verification_uri": f"{self.url}/device",
                "verification_uri_complete": f"{self.url}/device?user_code=ABCD-1234",
                "expires_in": 600,
                "interval": 1,
            }
        if path == "/api/oauth/token":
            grant = body.get("grant_type")
            if grant == "urn:ietf:params:oauth:grant-type:device_code":
                self.polls += 1
                if self.polls <= self.pending_polls:
                    return 400, {
                        "error": "authorization_pending",
                        "error_description": "waiting for the user",
                    }
                return 200, self._issue()
            if grant == "refresh_token" and self.hold_refreshes is not None:
                self.hold_refreshes.wait(timeout=60)
            if grant == "refresh_token" and body.get("refresh_token") == f"refresh-{self.issued}":
                return 200, self._issue()
            return 401, {"error": "invalid_grant", "error_description": "refresh token rejected"}
        if not authorized:
            return 401, {"error": "unauthorized"}
        if path == "/v1/chat/completions":
            return 200, Stream(f"hello, holder of {bearer}")
        if path == "/v1/models":
            return 200, {"data": self.models}
        if path == "/search":
            limit = int(body.get("limit", 5))
            results = [
                {
                    "site_name": "Example",
                    "title": f"Result {i} for {body.get('text_query')}",
                    "url": f"https://example.com/{i}",
                    "snippet": f"snippet {i}",
                    "content": "PAGE TEXT" if body.get("enable_page_crawling") else "",
                    "date": "2026-01-0" + str(i + 1),
                }
                for i in range(min(limit, 2))
            ]
            return 200, {"search_results": results}
        if path == "/fetch":
            url = str(body.get("url"))
            if url.endswith("/broken"):
                return 502, {"error": "upstream"}
            return 200, f"# Served by the fetch service\n\n{url}\n"
        return 404, {"error": "no such route"}

    def __enter__(self) -> FakePlatform:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self, body: Any) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, answer = platform.handle(self.path.split("?")[0], headers, body)
                data = answer.encode() if isinstance(answer, Stream | str) else json.dumps(answer).encode()
                self.send_response(status)
                ctype = "application/json"
                if isinstance(answer, str):
                    ctype = "text/markdown"
                elif isinstance(answer, Stream):
                    ctype = "text/event-stream"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve({})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    body: Any = json.loads(raw or "{}")
                else:
                    body = dict(parse_qsl(raw))
                self._serve(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
