"""A one-shot listener on 127.0.0.1 for an OAuth authorization redirect (`/callback?code=…&state=…`):
the browser lands here after the user approves. Loopback only, a random port, the Host header
checked; the OAuth `state` (verified by the SDK) ties the answer to this very request."""

from __future__ import annotations

from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc

PAGE = (
    b"<!doctype html><html><body><p>Authorization %s. You can close this window and return "
    b"to the terminal.</p></body></html>"
)
MAX_REQUEST_BYTES = 16_384


class CallbackListener:
    """`async with CallbackListener() as l:` → `l.redirect_uri`, then `await l.wait()`."""

    timeout_s = 300.0
    """How long the user has to approve in the browser."""

    def __init__(self) -> None:
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._result: dict[str, str] | None = None
        self._done = anyio.Event()
        self.port = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def __aenter__(self) -> CallbackListener:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self._listener = listener
        self.port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(listener.serve, self._handle)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._group is not None and self._listener is not None
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(kind, exc, tb)
        await self._listener.aclose()

    async def wait(self) -> Any:
        """The SDK's callback handler: the code and state of the redirect."""
        from mcp.client.auth import AuthorizationCodeResult

        await self._done.wait()
        assert self._result is not None
        if "error" in self._result:
            why = self._result.get("error_description") or self._result["error"]
            raise RuntimeError(f"the authorization server refused: {why}")
        return AuthorizationCodeResult(
            code=self._result.get("code", ""), state=self._result.get("state"), iss=self._result.get("iss")
        )

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in request and len(request) < MAX_REQUEST_BYTES:
                    chunk = await stream.receive()
                    if not chunk:
                        break
                    request += chunk
            lines = request.decode("latin-1").split("\r\n")
            method, _, rest = lines[0].partition(" ")
            target = rest.rpartition(" ")[0]
            host = next(
                (ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("host:")), ""
            )
            url = urlsplit(target)
            if (
                method != "GET"
                or url.path != "/callback"
                or host != f"127.0.0.1:{self.port}"
                or self._done.is_set()
            ):
                await stream.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            self._result = query
            body = PAGE % (b"failed" if "error" in query else b"complete")
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            await stream.send(head.encode() + body)
            self._done.set()
