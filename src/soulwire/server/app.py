"""The server's ASGI app: Wire over WebSocket, one session per connection (`/ws/sessions/new`
creates one, `/ws/sessions/{id}` opens one), and the HTTP API (`api.py`), all behind the web
app's front door and the guard (`web.py`, `security.py`: token, Host and Origin are checked
before anything else, for every request).

The sessions' WebSockets are served here with Starlette's WebSocket class alone. FastAPI, which
the HTTP API is built with, costs ~0.5 s of CPU to import, and fleets only ever open sessions:
so it is kept off the path to a first session. The API app is built once, in a worker thread
(the sessions already running go on meanwhile): when the first request needs it (the forked
copies of `--processes N`), or as the server starts (`build_api_at_start`: a single process,
whose web UI's first page needs it; building it alongside the page's static files and a first
session was 0.2 s sooner to that page than building it before serving, bench/RESULTS.md §16)."""

from __future__ import annotations

import itertools
import logging
import re
import threading
import traceback
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from soulwire.server.client import Client
from soulwire.server.hub import LiveSession
from soulwire.server.messages import AttachParams
from soulwire.server.models_info import price_of
from soulwire.server.registry import Located, ServeSettings, SessionError, SessionRegistry
from soulwire.server.security import ASGIApp, Guard, GuardMiddleware, Receive, Scope, Send
from soulwire.server.web import WebMiddleware
from soulwire.wire.jsonrpc import RPCError, encode

log = logging.getLogger("soulwire.server")

SUBPROTOCOL = "soulwire"
SESSION_CONFLICT = 4409
"""WebSocket close code: the attach was refused (the controller role is taken)."""
NEW_SESSION_PATH = "/ws/sessions/new"
_SESSION_PATH = re.compile(r"/ws/sessions/([^/]+)")


class ServerApp:
    """The root ASGI app: lifespan (the session registry), the sessions' WebSockets, and every
    other request handed to the HTTP API app, built at its first use."""

    def __init__(self, settings: ServeSettings, guard: Guard, *, build_api_at_start: bool = False) -> None:
        self.settings = settings
        self.guard = guard
        self.build_api_at_start = build_api_at_start
        """Build the HTTP API in a worker thread as soon as the server has started."""
        self._registry: SessionRegistry | None = None
        self.wound_down = False
        """Set once the lifespan's shutdown has closed every session (their files with them)."""
        self._api: ASGIApp | None = None
        self._api_lock = threading.Lock()
        self._numbers = itertools.count(1)
        # The web front door outermost, then the guard: as they were around the whole API.
        self._guarded = WebMiddleware(GuardMiddleware(self._route, guard), guard)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._guarded(scope, receive, send)

    def registry(self) -> SessionRegistry:
        assert self._registry is not None, "the server has not started"
        return self._registry

    @property
    def api_built(self) -> bool:
        return self._api is not None

    def build_api(self) -> ASGIApp:
        """The HTTP API app, built at the first call; callers from several threads at once
        wait for the one build."""
        with self._api_lock:
            if self._api is None:
                from soulwire.server.api import create_api

                api = create_api(self.settings, self.guard, self.registry)
                # Starlette builds the middleware stack at the first request: here instead,
                # off the event loop like the rest.
                api.middleware_stack = api.build_middleware_stack()
                self._api = api
            return self._api

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind == "websocket":
            path = _route_path(scope)
            if path == NEW_SESSION_PATH:
                await self._new_session_socket(WebSocket(scope, receive, send))
                return
            found = _SESSION_PATH.fullmatch(path)
            if found is not None:
                await self._wire_socket(WebSocket(scope, receive, send), found.group(1))
                return
        api = self._api or await anyio.to_thread.run_sync(self._api_for_a_request)
        await api(scope, receive, send)

    def _api_for_a_request(self) -> ASGIApp:
        """`build_api` for a request that came first; where nothing built it at the start (a
        forked copy), with the price table its answers may need (~40 ms; a copy loads
        neither unless asked, and fleets never ask)."""
        api = self.build_api()
        if not self.build_api_at_start:
            price_of(None)
        return api

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan protocol around `_running` (as Starlette's router speaks it)."""
        started = False
        await receive()  # lifespan.startup
        try:
            async with self._running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()  # lifespan.shutdown
        except BaseException:
            failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
            await send({"type": failed, "message": traceback.format_exc()})
            raise
        await send({"type": "lifespan.shutdown.complete"})

    @asynccontextmanager
    async def _running(self) -> AsyncGenerator[None]:
        from soulwire.llm.transport import SHARED_CLIENTS

        SHARED_CLIENTS.enable()  # every session runs on this one loop: they may share pools
        async with anyio.create_task_group() as group:
            self._registry = SessionRegistry(self.settings, group)
            if self.build_api_at_start:
                group.start_soon(self._build_api_now)
                group.start_soon(_warm_prices)
            yield
            self.wound_down = await self._registry.aclose()
            group.cancel_scope.cancel()

    async def _build_api_now(self) -> None:
        """`build_api` in a worker thread. A stop does not wait for it; a failure is logged (and
        met again by the first request that needs the API), not raised into the lifespan."""
        try:
            await anyio.to_thread.run_sync(self.build_api, abandon_on_cancel=True)
        except Exception:
            log.exception("soulwire serve: the HTTP API could not be built")

    async def _new_session_socket(self, websocket: WebSocket) -> None:
        """Create a session (`work_dir`, `title`, `model` in the query, as `POST /api/sessions`
        takes them) and attach to it on this connection: one round trip instead of two, for
        clients that open many sessions (fleets). The `attached` notice names it."""
        query = websocket.query_params
        registry = self.registry()

        def create() -> Located:
            return registry.create(query.get("work_dir"), query.get("title"), model=query.get("model"))

        try:
            created = await anyio.to_thread.run_sync(create, limiter=registry.disk_limiter)
            live = await registry.open(created.id)
        except SessionError as exc:
            await _deny(websocket, exc)
            return
        await self._accept(websocket, live)

    async def _wire_socket(self, websocket: WebSocket, session_id: str) -> None:
        try:
            live = await self.registry().open(session_id)
        except SessionError as exc:
            await _deny(websocket, exc)
            return
        await self._accept(websocket, live)

    async def _accept(self, websocket: WebSocket, live: LiveSession) -> None:
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        read_only = websocket.scope.get("state", {}).get("role") != "full"
        client = Client(
            next(self._numbers),
            max_queued_bytes=self.settings.hub.client_queue_bytes,
            max_message_bytes=self.settings.hub.max_message_bytes,
            read_only=read_only,
        )
        await _serve_socket(websocket, live, client)


def create_app(settings: ServeSettings, guard: Guard, *, build_api_at_start: bool = False) -> ServerApp:
    """The server's ASGI app (guarded: token, Host and Origin checked before routing)."""
    return ServerApp(settings, guard, build_api_at_start=build_api_at_start)


async def _deny(websocket: WebSocket, exc: SessionError) -> None:
    """Refuse the connection with an HTTP answer before the handshake (404, 409, 422, …)."""
    await websocket.send_denial_response(JSONResponse({"detail": exc.message}, status_code=exc.status))


def _route_path(scope: Scope) -> str:
    """The request's path below the app's `root_path` (how Starlette's routes match it)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :]
    return path


async def _warm_prices() -> None:
    """Import the price table (~50 ms) in a worker thread once the first page has loaded, so
    neither start-up nor that page waits for it."""
    await anyio.sleep(2)
    await anyio.to_thread.run_sync(price_of, None)


def _attach_from_query(websocket: WebSocket) -> AttachParams | None:
    """`?since_seq=N&mode=observer&take=1&epoch=E&client_key=K`: attach as the connection opens."""
    query = websocket.query_params
    if not any(k in query for k in ("since_seq", "mode", "take", "epoch", "client_key")):
        return None
    raw: dict[str, Any] = {}
    if "since_seq" in query:
        raw["since_seq"] = int(query["since_seq"])
    if "mode" in query:
        raw["mode"] = query["mode"]
    if "take" in query:
        raw["take"] = query["take"] in ("1", "true", "yes")
    if "epoch" in query:
        raw["epoch"] = query["epoch"]
    if "client_key" in query:
        raw["client_key"] = query["client_key"]
    return AttachParams.model_validate(raw)


async def _serve_socket(websocket: WebSocket, live: LiveSession, client: Client) -> None:
    try:
        attach = _attach_from_query(websocket)
        if client.read_only:
            attach = (attach or AttachParams()).model_copy(update={"mode": "observer"})
        if attach is None:
            live.connect(client)
        else:
            result = live.attach(client, attach)
            client.deliver_first(  # before the backlog it announces
                (encode({"jsonrpc": "2.0", "method": "attached", "params": result}) + "\n").encode()
            )
    except (RPCError, ValueError) as exc:
        reason = exc.message if isinstance(exc, RPCError) else "bad attach parameters"
        await websocket.close(SESSION_CONFLICT, reason[:120])
        return
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_write_loop, websocket, client)
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("text") if message.get("text") is not None else message.get("bytes")
                if data is not None:
                    live.handle(client, data)
            client.close(1000, "")
    finally:
        live.detach(client)
        client.close(1000, "")


async def _write_loop(websocket: WebSocket, client: Client) -> None:
    while (batch := await client.next_batch()) is not None:
        try:
            for frame in client.frames(batch):
                await websocket.send_text(frame)
        except Exception:  # the connection is gone; the reader sees the disconnect
            client.close(1006, "")
            return
    if client.close_code != 1000:
        try:
            await websocket.close(client.close_code, client.close_reason)
        except Exception:
            pass


__all__ = ["NEW_SESSION_PATH", "ServerApp", "create_app"]
