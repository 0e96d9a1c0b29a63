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
from soulwire.server.access import DRAIN_PATH, user_of, visible
from soulwire.server.audit import Action, AuditEntry
from soulwire.server.audit import entry as audit_entry
from soulwire.server.models_info import ModelList, Price, list_models
from soulwire.server.registry import (
    OWNER_KEY,
    SHARED_KEY,
    Located,
    ServeSettings,
    SessionError,
    SessionRegistry,
    error_answer,
)
from soulwire.server.security import Guard
from soulwire.server.users import Role
from soulwire.sessions.store import StoreUnavailable
from soulwire.wire.session_settings import OverlayMode, SandboxMode, SessionSettings


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
    replica: str | None = None
    """On a shared store: the address of the replica that runs the session (None: nobody)."""
    owner: str | None = None
    """With named users: the user who created the session."""
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
    sandbox: SandboxMode | None = Field(
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
    checkpoints: StrictBool | None = Field(
        default=None,
        description="checkpoints of the work dir (rewind, fork with files); default: the server's",
    )
    overlay: OverlayMode | None = Field(
        default=None,
        description="with sandbox=workspace-write: each turn's writes land in an overlay, then "
        "committed, discarded, or kept pending until `overlay_commit`/`overlay_discard` (`ask`); "
        "422 where the overlay cannot run; default: the server's",
    )
    create_dir: StrictBool = Field(default=False, description="create a missing `work_dir` (and parents)")

    def session_settings(self) -> SessionSettings:
        """The settings the new session keeps."""
        return SessionSettings(
            model=self.model,
            yolo=self.yolo,
            sandbox=self.sandbox,
            sandbox_network=self.sandbox_network,
            plan_mode=self.plan_mode,
            checkpoints=self.checkpoints,
            overlay=self.overlay,
        )


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


class ShareSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(min_length=1, max_length=64, description="the named user to share the session with")


class Handover(BaseModel):
    handed_over: int = Field(description="sessions released to the other replicas")
    running: int = Field(description="sessions still running a turn here (not released)")


class Me(BaseModel):
    user: str | None = Field(description="the named user of the token (null: the server's single token)")
    role: Role | None = None


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
    async def session_error(request: Request, exc: SessionError) -> JSONResponse:
        body, headers = error_answer(exc, request.url.path, request.url.query)
        return JSONResponse(body, status_code=exc.status, headers=headers)

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(_request: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.get("/", response_model=ServerIndex)
    async def index() -> ServerIndex:
        return ServerIndex(version=__version__)

    @app.get("/api/sessions", response_model=list[SessionInfo])
    async def list_sessions(
        request: Request,
        work_dir: str | None = None,
        archived: bool | None = Query(None, description="true: only archived; false: only the others"),
    ) -> list[SessionInfo]:
        """The sessions this token may see (a named user: their own and those shared with them)."""
        listed = await registry().off_loop(lambda: registry().list(work_dir, archived))
        infos = visible(user_of(request.scope), listed)
        return [SessionInfo.model_validate(i) for i in infos]

    @app.post("/api/sessions", response_model=SessionInfo, status_code=201)
    async def create_session(request: Request, body: CreateSession) -> SessionInfo:
        user = user_of(request.scope)

        def create() -> SessionInfo:
            created = registry().create(
                body.work_dir, body.title, body.session_settings(), create_dir=body.create_dir,
                owner=user.name if user else None,
            )  # fmt: skip
            return info(created)

        # Off the event loop: the durable state.json (fsync) and the index write wait for the disk.
        return await anyio.to_thread.run_sync(create, limiter=registry().disk_limiter)

    @app.get("/api/models", response_model=ModelList)
    async def models() -> ModelList:
        """The models a new session may name, the default, and their prices if known."""
        return list_models(settings)

    @app.get("/api/sessions/{session_id}", response_model=SessionInfo)
    async def get_session(session_id: str) -> SessionInfo:
        return await registry().off_loop(lambda: info(registry().locate(session_id)))

    @app.patch("/api/sessions/{session_id}", response_model=SessionInfo)
    async def update_session(session_id: str, body: UpdateSession) -> SessionInfo:
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
    async def fork_session(request: Request, session_id: str, body: ForkSession) -> SessionInfo:
        forked = await registry().fork(session_id, body.title, body.turn)
        user = user_of(request.scope)
        if user is not None:  # the copy is the forker's
            forked = registry().update_state(forked.id, {OWNER_KEY: user.name, SHARED_KEY: []})
            record(user.name, "fork", session_id, {"new_session_id": forked.id, "turn": body.turn})
        return info(forked)

    @app.post("/api/sessions/{session_id}/share", response_model=SessionInfo)
    async def share_session(request: Request, session_id: str, body: ShareSession) -> SessionInfo:
        """Let another named user see (and, a member, drive) this session: by its owner or an admin."""
        user = user_of(request.scope)
        users = guard.users
        if user is None or users is None:
            raise HTTPException(
                409, "this server has no named users: everyone with the token sees every session"
            )
        if body.user not in users.names:
            raise HTTPException(422, f"no user {body.user!r}")
        shared = [n for n in registry().state_of(session_id).get(SHARED_KEY) or [] if n != body.user]
        found = registry().update_state(session_id, {SHARED_KEY: [*shared, body.user]})
        record(user.name, "share", session_id, {"with": body.user})
        return info(found)

    @app.get("/api/audit", response_model=list[AuditEntry])
    async def audit(
        session_id: str | None = None,
        user: str | None = None,
        since: float | None = Query(None, description="seconds since the epoch"),
        limit: int = Query(1000, ge=1, le=100_000),
    ) -> list[AuditEntry]:
        """Who prompted, approved, changed a rule, cancelled, forked, rewound or shared (admins
        only), oldest first: the newest `limit` entries that match."""
        log = settings.hub.audit
        if log is None:
            return []
        return await anyio.to_thread.run_sync(
            lambda: log.query(session_id=session_id, user=user, since=since, limit=limit)
        )

    @app.get("/api/me", response_model=Me)
    async def me(request: Request) -> Me:
        """Who this token is."""
        user = user_of(request.scope)
        return Me(user=user.name, role=user.role) if user else Me(user=None)

    def record(user: str, action: Action, session_id: str, detail: dict[str, Any]) -> None:
        if settings.hub.audit is not None:
            settings.hub.audit.append(audit_entry(user, action, session_id, detail))

    @app.delete("/api/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str) -> Response:
        await registry().delete(session_id)
        return Response(status_code=204)

    @app.post("/api/sessions/{session_id}/handover", response_model=Handover)
    async def handover_session(
        session_id: str, wait: float = Query(0, ge=0, le=3600, description="seconds to wait for a turn")
    ) -> Handover:
        """Release a session this replica runs, once idle (409 if a turn still runs after
        `wait` seconds): its clients are disconnected with code 1012 and re-attach from their
        `seq` on the next replica they reach (shared stores only)."""
        from soulwire.server.handover import hand_over

        released = await hand_over(registry(), session_id, wait_s=wait)
        return Handover(handed_over=int(released), running=0)

    @app.post(DRAIN_PATH, response_model=Handover)
    async def drain_replica(
        wait: float = Query(60, ge=0, le=3600, description="seconds to wait for running turns"),
    ) -> Handover:
        """Drain this replica before stopping it (admins): `/healthz` answers 503 from now on,
        no session is opened here, and every live one is handed over as soon as it is idle."""
        from soulwire.server.handover import drain

        return Handover.model_validate(await drain(registry(), wait_s=wait))

    @app.get("/api/sessions/{session_id}/history", response_model=History)
    async def history(
        session_id: str, since: int = Query(0, ge=0), limit: int = Query(1000, ge=1, le=100_000)
    ) -> History:
        found = await registry().off_loop(lambda: registry().history(session_id, since, limit))
        return History.model_validate(found)

    @app.post("/api/sessions/{session_id}/observer-tokens", response_model=ObserverToken, status_code=201)
    async def mint_observer_token(request: Request, session_id: str) -> ObserverToken:
        if request.scope.get("state", {}).get("role") != "full":
            raise HTTPException(403, "an observer token cannot mint tokens")
        found = registry().locate(session_id)
        token = secrets.token_urlsafe(24)
        guard.observer_tokens[token] = found.id
        return ObserverToken(token=token, session_id=found.id, ws_path=f"/ws/sessions/{found.id}")

    @app.get("/api/blobs/{blob_id}", response_class=FileResponse)
    async def read_blob(blob_id: str) -> FileResponse:
        """A large payload an event referred to (`blob.blob_id`), whole."""
        path = settings.hub.blobs.path(blob_id) if settings.hub.blobs else None
        if path is None:
            raise HTTPException(404, f"no blob {blob_id!r}")
        return FileResponse(path, media_type="application/json")

    from soulwire.server.web_api import web_router

    app.include_router(web_router(settings, registry))
    return app


__all__ = ["SessionInfo", "create_api"]
