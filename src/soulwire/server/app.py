"""The ASGI application: the HTTP API over the session registry, and Wire over WebSocket at
`/ws/sessions/{id}` (one session per connection). FastAPI generates the OpenAPI document
(`/openapi.json`) from the typed routes below."""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.to_thread
from fastapi import FastAPI, HTTPException, Query, Request, Response, WebSocket
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from soulwire import __version__
from soulwire.server.client import Client
from soulwire.server.hub import LiveSession
from soulwire.server.messages import AttachParams
from soulwire.server.models_info import ModelList, Price, list_models, price_of
from soulwire.server.registry import Located, ServeSettings, SessionError, SessionRegistry
from soulwire.server.security import Guard, GuardMiddleware
from soulwire.wire.jsonrpc import RPCError, encode

log = logging.getLogger("soulwire.server")

SUBPROTOCOL = "soulwire"
SESSION_CONFLICT = 4409
"""WebSocket close code: the attach was refused (the controller role is taken)."""


class SessionInfo(BaseModel):
    """A session as listed: id, title, times, size, turns, and its live state here."""

    model_config = ConfigDict(extra="allow")
    id: str
    work_dir: str
    title: str | None = None
    created: float | None = None
    updated: float | None = None
    turns: int = 0
    size: int = 0
    live: bool = False
    busy: bool = False
    clients: int = 0
    last_seq: int | None = None
    held_elsewhere: bool = False
    sandbox: dict[str, Any] | None = None
    """The sandbox chosen for the session (`mode`, `network`), if one was."""
    archived: bool = False
    archived_at: float | None = None
    model: str | None = Field(default=None, description="the model alias the session runs with here")
    model_name: str | None = Field(default=None, description="the provider's name of that model")
    price: Price | None = Field(default=None, description="USD per million tokens; null: unknown")
    yolo: bool = Field(default=False, description="tool calls run without approval")
    plan_mode: bool = False


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    work_dir: str | None = Field(default=None, description="absolute path; default: the server's work dir")
    title: str | None = Field(default=None, max_length=200)
    sandbox: Literal["off", "read-only", "workspace-write"] | None = Field(
        default=None, description="run the session's tools in bubblewrap; default: the config's"
    )
    sandbox_network: bool | None = Field(default=None, description="network inside the sandbox (default off)")
    model: str | None = Field(
        default=None,
        max_length=200,
        description="a model alias of `GET /api/models` (422 for another); default: the server's",
    )
    yolo: StrictBool = Field(default=False, description="start with every tool call approved (as `/yolo`)")
    plan_mode: StrictBool = Field(default=False, description="start in plan mode")
    create_dir: StrictBool = Field(default=False, description="create a missing `work_dir` (and parents)")


class UpdateSession(BaseModel):
    """Rename and/or archive: the fields given are changed."""

    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, min_length=1, max_length=200)
    archived: StrictBool | None = Field(
        default=None, description="hide from the default listing (it can still be opened and read)"
    )


class ForkSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, max_length=200)
    turn: int | None = Field(default=None, ge=0)
    """Keep only the first `turn` turns (None: the whole history)."""


class History(BaseModel):
    id: str
    since: int
    total: int
    records: list[dict[str, Any]]


class ObserverToken(BaseModel):
    token: str
    session_id: str
    ws_path: str


class ServerIndex(BaseModel):
    name: Literal["soulwire"] = "soulwire"
    version: str
    sessions: str = "/api/sessions"
    websocket: str = "/ws/sessions/{id}"
    openapi: str = "/openapi.json"


def create_app(settings: ServeSettings, guard: Guard) -> FastAPI:
    """The server's ASGI app (guarded: token, Host and Origin checked before routing)."""
    state: dict[str, Any] = {}
    numbers = itertools.count(1)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncGenerator[None]:
        from soulwire.llm.transport import SHARED_CLIENTS

        SHARED_CLIENTS.enable()  # every session runs on this one loop: they may share pools
        async with anyio.create_task_group() as group:
            state["registry"] = SessionRegistry(settings, group)
            group.start_soon(_warm_prices)
            yield
            await state["registry"].aclose()
            group.cancel_scope.cancel()

    app = FastAPI(
        title="Soulwire server",
        version=__version__,
        description="Sessions of a coding agent over HTTP, and Wire (JSON-RPC 2.0) over WebSocket.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )

    def registry() -> SessionRegistry:
        return state["registry"]

    def info(found: Located) -> SessionInfo:
        return SessionInfo.model_validate(registry().describe(found))

    @app.exception_handler(SessionError)
    async def session_error(_request: Request, exc: SessionError) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.get("/", response_model=ServerIndex)
    async def index() -> ServerIndex:  # pyright: ignore[reportUnusedFunction]
        return ServerIndex(version=__version__)

    @app.get("/api/sessions", response_model=list[SessionInfo])
    async def list_sessions(  # pyright: ignore[reportUnusedFunction]
        work_dir: str | None = None,
        archived: bool | None = Query(None, description="true: only archived; false: only the others"),
    ) -> list[SessionInfo]:
        return [SessionInfo.model_validate(i) for i in registry().list(work_dir, archived)]

    @app.post("/api/sessions", response_model=SessionInfo, status_code=201)
    async def create_session(body: CreateSession) -> SessionInfo:  # pyright: ignore[reportUnusedFunction]
        def create() -> SessionInfo:
            created = registry().create(
                body.work_dir,
                body.title,
                body.sandbox,
                body.sandbox_network,
                model=body.model,
                yolo=body.yolo,
                plan_mode=body.plan_mode,
                create_dir=body.create_dir,
            )
            return info(created)

        # Off the event loop: the durable state.json (fsync) and the index write wait for the disk.
        return await anyio.to_thread.run_sync(create, limiter=registry().disk_limiter)

    @app.get("/api/models", response_model=ModelList)
    async def models() -> ModelList:  # pyright: ignore[reportUnusedFunction]
        """The models a new session may name, the default, and their prices if known."""
        return list_models(settings)

    @app.get("/api/sessions/{session_id}", response_model=SessionInfo)
    async def get_session(session_id: str) -> SessionInfo:  # pyright: ignore[reportUnusedFunction]
        return info(registry().locate(session_id))

    @app.patch("/api/sessions/{session_id}", response_model=SessionInfo)
    async def update_session(session_id: str, body: UpdateSession) -> SessionInfo:  # pyright: ignore[reportUnusedFunction]
        """Rename (`title`) and/or archive or unarchive (`archived`)."""
        if body.title is None and body.archived is None:
            raise HTTPException(422, "nothing to change: give `title` and/or `archived`")
        found = registry().locate(session_id)
        if body.title is not None:
            found = registry().rename(session_id, body.title)
        if body.archived is not None:
            found = registry().archive(session_id, body.archived)
        return info(found)

    @app.post("/api/sessions/{session_id}/fork", response_model=SessionInfo, status_code=201)
    async def fork_session(session_id: str, body: ForkSession) -> SessionInfo:  # pyright: ignore[reportUnusedFunction]
        return info(registry().fork(session_id, body.title, body.turn))

    @app.delete("/api/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str) -> Response:  # pyright: ignore[reportUnusedFunction]
        await registry().delete(session_id)
        return Response(status_code=204)

    @app.get("/api/sessions/{session_id}/history", response_model=History)
    async def history(  # pyright: ignore[reportUnusedFunction]
        session_id: str, since: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=100_000)
    ) -> History:
        return History.model_validate(registry().history(session_id, since, limit))

    @app.post("/api/sessions/{session_id}/observer-tokens", response_model=ObserverToken, status_code=201)
    async def mint_observer_token(request: Request, session_id: str) -> ObserverToken:  # pyright: ignore[reportUnusedFunction]
        if request.scope.get("state", {}).get("role") != "full":
            raise HTTPException(403, "an observer token cannot mint tokens")
        found = registry().locate(session_id)
        token = secrets.token_urlsafe(24)
        guard.observer_tokens[token] = found.id
        return ObserverToken(token=token, session_id=found.id, ws_path=f"/ws/sessions/{found.id}")

    @app.get("/api/blobs/{blob_id}", response_class=FileResponse)
    async def read_blob(blob_id: str) -> FileResponse:  # pyright: ignore[reportUnusedFunction]
        """A large payload an event referred to (`blob.blob_id`), whole."""
        path = settings.hub.blobs.path(blob_id) if settings.hub.blobs else None
        if path is None:
            raise HTTPException(404, f"no blob {blob_id!r}")
        return FileResponse(path, media_type="application/json")

    @app.websocket("/ws/sessions/new")
    async def new_session_socket(websocket: WebSocket) -> None:  # pyright: ignore[reportUnusedFunction]
        """Create a session (`work_dir`, `title`, `model` in the query, as `POST /api/sessions`
        takes them) and attach to it on this connection: one round trip instead of two, for
        clients that open many sessions (fleets). The `attached` notice names it."""
        query = websocket.query_params

        def create() -> Located:
            return registry().create(query.get("work_dir"), query.get("title"), model=query.get("model"))

        try:
            created = await anyio.to_thread.run_sync(create, limiter=registry().disk_limiter)
            live = await registry().open(created.id)
        except SessionError as exc:
            await websocket.send_denial_response(
                JSONResponse({"detail": exc.message}, status_code=exc.status)
            )
            return
        await _accept(websocket, live)

    @app.websocket("/ws/sessions/{session_id}")
    async def wire_socket(websocket: WebSocket, session_id: str) -> None:  # pyright: ignore[reportUnusedFunction]
        try:
            live = await registry().open(session_id)
        except SessionError as exc:
            await websocket.send_denial_response(
                JSONResponse({"detail": exc.message}, status_code=exc.status)
            )
            return
        await _accept(websocket, live)

    async def _accept(websocket: WebSocket, live: LiveSession) -> None:
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        read_only = websocket.scope.get("state", {}).get("role") != "full"
        client = Client(
            next(numbers),
            max_queued_bytes=settings.hub.client_queue_bytes,
            max_message_bytes=settings.hub.max_message_bytes,
            read_only=read_only,
        )
        await _serve_socket(websocket, live, client)

    from soulwire.server.web import WebMiddleware
    from soulwire.server.web_api import web_router

    app.include_router(web_router(settings, registry))
    app.add_middleware(GuardMiddleware, guard=guard)  # pyright: ignore[reportArgumentType]
    app.add_middleware(WebMiddleware, guard=guard)  # pyright: ignore[reportArgumentType]  (outermost)
    return app


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


__all__ = ["SessionInfo", "create_app"]
