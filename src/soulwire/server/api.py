"""The HTTP API over the session registry, with the browser's endpoints (`web_api.py`).
FastAPI generates the OpenAPI document (`/openapi.json`) from the typed routes below.

Importing FastAPI and declaring these routes costs ~0.5 s of CPU (its pydantic models are built
at import), so this module is not on the path to a WebSocket session: the server's root app
(`app.py`) serves the sessions' WebSockets itself and builds this app in a worker thread, as a
single process starts or at a forked copy's first request for it."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, Literal

import anyio.to_thread
from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from soulwire import __version__
from soulwire.server.models_info import ModelList, Price, list_models
from soulwire.server.registry import Located, ServeSettings, SessionError, SessionRegistry
from soulwire.server.security import Guard


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


def create_api(settings: ServeSettings, guard: Guard, registry: Callable[[], SessionRegistry]) -> FastAPI:
    """The HTTP API over `registry()`. The root app (`app.py`) puts it behind the guard (token,
    Host and Origin are checked before a request gets here) and runs the registry's lifespan."""
    app = FastAPI(
        title="Soulwire server",
        version=__version__,
        description="Sessions of a coding agent over HTTP, and Wire (JSON-RPC 2.0) over WebSocket.",
        docs_url=None,
        redoc_url=None,
    )

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

    from soulwire.server.web_api import web_router

    app.include_router(web_router(settings, registry))
    return app


__all__ = ["SessionInfo", "create_api"]
