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

import importlib
import itertools
import logging
import re
import secrets
import threading
import traceback
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from soulwire.server.access import refusal, user_of
from soulwire.server.client import Client
from soulwire.server.hub import LiveSession
from soulwire.server.messages import AttachParams
from soulwire.server.models_info import price_of
from soulwire.server.registry import Located, ServeSettings, SessionError, SessionRegistry, error_answer
from soulwire.server.security import ASGIApp, Guard, GuardMiddleware, Receive, Scope, Send, refuse
from soulwire.server.web import WebMiddleware
from soulwire.wire.jsonrpc import RPCError, encode
from soulwire.wire.session_settings import OVERLAY_MODES, SANDBOX_MODES, SessionSettings

if TYPE_CHECKING:
    from soulwire.server.follow import FollowedSession

log = logging.getLogger("soulwire.server")

SUBPROTOCOL = "soulwire"
SESSION_CONFLICT = 4409
"""WebSocket close code: the attach was refused (the controller role is taken)."""
NEW_SESSION_PATH = "/ws/sessions/new"
ACP_PATH = "/acp"
"""The Agent Client Protocol over WebSocket (`acp_socket.py`)."""
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
        if kind in ("http", "websocket") and user_of(scope) is not None:
            reason = await refusal(scope, _route_path(scope), self.registry())
            if reason is not None:
                await refuse(scope, receive, send, 403, reason)
                return
        if kind == "websocket":
            path = _route_path(scope)
            if path == ACP_PATH:
                await self._acp_socket(WebSocket(scope, receive, send))
                return
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
            registry = self._registry = SessionRegistry(self.settings, group)
            self.guard.draining = lambda: registry.draining
            if self.build_api_at_start:
                group.start_soon(self._build_api_now)
                group.start_soon(_warm_prices)
            yield
            self.wound_down = await self._registry.aclose()
            await SHARED_CLIENTS.aclose()  # the sessions' shared provider connections
            group.cancel_scope.cancel()

    async def _build_api_now(self) -> None:
        """`build_api` in a worker thread. A stop does not wait for it; a failure is logged (and
        met again by the first request that needs the API), not raised into the lifespan."""
        try:
            await anyio.to_thread.run_sync(self.build_api, abandon_on_cancel=True)
        except Exception:
            log.exception("soulwire serve: the HTTP API could not be built")

    async def _new_session_socket(self, websocket: WebSocket) -> None:
        """Create a session (`work_dir`, `title`, `model`, `checkpoints`, `sandbox`, `overlay` in
        the query, as `POST /api/sessions` takes them) and attach to it on this connection: one
        round trip instead of two, for clients that open many sessions (fleets). The `attached`
        notice names it."""
        query = websocket.query_params
        registry = self.registry()

        user = user_of(websocket.scope)
        flag = query.get("checkpoints")
        sandbox, overlay = query.get("sandbox"), query.get("overlay")
        if sandbox not in (None, *SANDBOX_MODES) or overlay not in (None, *OVERLAY_MODES):
            wrong = f"sandbox={sandbox}" if sandbox not in (None, *SANDBOX_MODES) else f"overlay={overlay}"
            await _deny(websocket, SessionError(422, f"unknown {wrong}"))
            return
        settings = SessionSettings(
            model=query.get("model"),
            checkpoints=None if flag is None else flag in ("1", "true"),
            sandbox=sandbox,
            overlay=overlay,
        )

        def create() -> Located:
            return registry.create(
                query.get("work_dir"), query.get("title"), settings, owner=user.name if user else None
            )

        try:
            created = await anyio.to_thread.run_sync(create, limiter=registry.disk_limiter)
            live = await registry.open(created.id)
        except SessionError as exc:
            await _deny(websocket, exc)
            return
        await self._accept(websocket, live)

    async def _acp_socket(self, websocket: WebSocket) -> None:
        """ACP over WebSocket. The handshake is answered at once; the ACP SDK (a second of
        imports on a busy machine) loads meanwhile, off the loop, and only when asked for."""
        await websocket.accept(headers=[(b"acp-connection-id", secrets.token_hex(16).encode())])
        module = await anyio.to_thread.run_sync(importlib.import_module, "soulwire.server.acp_socket")
        await module.serve_acp_socket(websocket, self.registry(), self._numbers, self.settings)

    async def _wire_socket(self, websocket: WebSocket, session_id: str) -> None:
        registry = self.registry()
        try:
            if _observing(websocket):
                live = await registry.observe(session_id)
            else:
                live = await registry.open(session_id)
        except SessionError as exc:
            await _deny(websocket, exc)
            return
        await self._accept(websocket, live)

    async def _accept(self, websocket: WebSocket, live: LiveSession | FollowedSession) -> None:
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        read_only = websocket.scope.get("state", {}).get("role") != "full"
        client = Client(
            next(self._numbers),
            max_queued_bytes=self.settings.hub.client_queue_bytes,
            max_message_bytes=self.settings.hub.max_message_bytes,
            read_only=read_only,
        )
        user = user_of(websocket.scope)
        client.user = user.name if user else None
        await _serve_socket(websocket, live, client)


def create_app(settings: ServeSettings, guard: Guard, *, build_api_at_start: bool = False) -> ServerApp:
    """The server's ASGI app (guarded: token, Host and Origin checked before routing)."""
    return ServerApp(settings, guard, build_api_at_start=build_api_at_start)


async def _deny(websocket: WebSocket, exc: SessionError) -> None:
    """Refuse the connection with an HTTP answer before the handshake (404, 409, 422, …; a
    307 to the replica that runs the session)."""
    body, headers = error_answer(exc, websocket.url.path, websocket.url.query, websocket=True)
    await websocket.send_denial_response(JSONResponse(body, status_code=exc.status, headers=headers))


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
    """`?since_seq=N&mode=observer&take=1&epoch=E&client_key=K&prompt_id=P`: attach as the
    connection opens."""
    query = websocket.query_params
    if not any(k in query for k in ("since_seq", "mode", "take", "epoch", "client_key", "prompt_id")):
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
    if "prompt_id" in query:
        raw["prompt_id"] = query["prompt_id"]
    return AttachParams.model_validate(raw)


def _observing(websocket: WebSocket) -> bool:
    """The connection only watches: `mode=observer` on its URL, or a token that may only watch."""
    return (
        websocket.query_params.get("mode") == "observer"
        or websocket.scope.get("state", {}).get("role") != "full"
    )


async def _serve_socket(websocket: WebSocket, live: LiveSession | FollowedSession, client: Client) -> None:
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
