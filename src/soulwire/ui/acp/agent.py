"""The ACP agent: session bookkeeping over the runtime (`acp.Agent` protocol of the SDK)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from acp import RequestError
from acp.schema import (
    AcpMcpServer,
    HttpMcpServer,
    ListSessionsResponse,
    LoadSessionResponse,
    McpServerStdio,
    NewSessionResponse,
    ResumeSessionResponse,
    SessionInfo,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    SseMcpServer,
)

from soulwire.config.loader import ConfigError
from soulwire.runtime.builder import build_runtime
from soulwire.runtime.options import SessionOptions
from soulwire.sessions.index import known_work_dirs
from soulwire.sessions.listing import list_sessions
from soulwire.sessions.paths import is_valid_session_id, session_dir
from soulwire.sessions.store import FileSessionStore
from soulwire.ui.acp.handshake import ClientCapabilities
from soulwire.ui.acp.prompts import PromptBlock
from soulwire.ui.acp.session import AcpSession, PermissionAsker, prewarm

SHUTDOWN_GRACE_S = 0.8
McpServer = HttpMcpServer | SseMcpServer | McpServerStdio | AcpMcpServer


def _mcp_config(servers: list[McpServer] | None) -> list[str]:
    """The editor's MCP servers in the engine's `--mcp-config` JSON form (servers over ACP
    itself are not advertised and are skipped)."""
    entries: dict[str, Any] = {}
    for server in servers or []:
        if isinstance(server, McpServerStdio):
            entries[server.name] = {
                "command": server.command,
                "args": list(server.args),
                "env": {e.name: e.value for e in server.env},
            }
        elif isinstance(server, HttpMcpServer | SseMcpServer):
            entries[server.name] = {
                "url": server.url,
                "headers": {h.name: h.value for h in server.headers},
                "transport": "sse" if isinstance(server, SseMcpServer) else "http",
            }
    return [json.dumps({"mcpServers": entries})] if entries else []


def _work_dir(cwd: str) -> Path:
    if not os.path.isabs(cwd):
        raise RequestError(-32602, f"cwd must be an absolute path: {cwd!r}")
    path = Path(os.path.normpath(cwd))
    if not path.is_dir():
        raise RequestError(-32602, f"cwd is not a directory: {cwd}")
    return path


class SoulwireAgent:
    """Implements the agent side of ACP; one process serves any number of sessions."""

    def __init__(
        self,
        options: SessionOptions,
        notify: Any,
        defer: Any,
        client: Callable[[], ClientCapabilities],
        group: anyio.abc.TaskGroup,
    ) -> None:
        self._base = options
        self._group = group  # the server's: each session's lifetime is a task in it
        self._client_capabilities = client  # what the editor declared in its latest `initialize`
        self._notify = notify
        self._defer = defer  # sends updates right after the response that names the session
        self._client: PermissionAsker | None = None
        self.sessions: dict[str, AcpSession] = {}
        self._warmed = False

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    # -- session life -----------------------------------------------------------
    async def _open(
        self,
        cwd: str,
        session_id: str | None,
        mcp_servers: list[McpServer] | None,
        additional_directories: list[str] | None,
    ) -> AcpSession:
        if session_id is not None and session_id in self.sessions:
            return self.sessions[session_id]
        work_dir = _work_dir(cwd)
        if session_id is not None and not (
            is_valid_session_id(session_id)
            and session_dir(self._base.share_dir, work_dir, session_id).is_dir()
        ):
            raise RequestError(
                -32002, f"Session not found: {session_id} (in {work_dir})", {"sessionId": session_id}
            )
        options = dataclasses.replace(
            self._base,
            work_dir=work_dir,
            session_id=session_id or FileSessionStore.new_id(),
            continue_last=False,
            add_dirs=[*self._base.add_dirs, *(Path(d) for d in additional_directories or [])],
            mcp_configs=[*self._base.mcp_configs, *_mcp_config(mcp_servers)],
        )
        try:
            runtime = build_runtime(options)
        except ConfigError as exc:
            raise RequestError(-32602, str(exc)) from None
        assert self._client is not None
        session = AcpSession(runtime, self._client, self._notify, self._client_capabilities())
        self.sessions[session.id] = session
        await self._group.start(session.live)
        return session

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session = await self._open(cwd, None, mcp_servers, additional_directories)
        self._defer(session.id, session.send_commands)
        self._defer(session.id, self._prewarm)
        return NewSessionResponse(
            session_id=session.id, modes=session.modes(), config_options=list(session.config_options())
        )

    def _prewarm(self) -> None:
        """Once, while the editor shows the new session: build the validators and serializers
        the first prompt would otherwise build on its way to the first chunk."""
        if not self._warmed:
            self._warmed = True
            prewarm()

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[McpServer] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        session = await self._open(cwd, session_id, mcp_servers, additional_directories)
        session.replay()
        self._defer(session.id, session.send_commands)
        return LoadSessionResponse(modes=session.modes(), config_options=list(session.config_options()))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        session = await self._open(cwd, session_id, mcp_servers, additional_directories)
        self._defer(session.id, session.send_commands)
        return ResumeSessionResponse(modes=session.modes(), config_options=list(session.config_options()))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        """The sessions of `cwd`, or of every work dir Soulwire has seen, newest first."""
        share = self._base.share_dir
        work_dirs = [str(_work_dir(cwd))] if cwd else known_work_dirs(share)
        found = [(s, work_dir) for work_dir in work_dirs for s in list_sessions(share, work_dir)]
        found.sort(key=lambda pair: pair[0].updated, reverse=True)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=s.id,
                    cwd=work_dir,
                    title=s.title,
                    updated_at=datetime.fromtimestamp(s.updated, UTC).isoformat().replace("+00:00", "Z"),
                )
                for s, work_dir in found
            ]
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        session = self._session(session_id)
        await self._end(session)

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(
                -32002,
                f"Session not found: {session_id} (open it with session/new, load or resume)",
                {"sessionId": session_id},
            )
        return session

    # -- turns and settings ----------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[PromptBlock], **kwargs: Any) -> dict[str, Any]:
        return await self._session(session_id).prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        session.set_config_option(config_id, value)
        return SetSessionConfigOptionResponse(config_options=list(session.config_options()))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise RequestError(-32602, f"Unknown auth method {method_id!r}: Soulwire needs no login")

    # -- shutdown ----------------------------------------------------------------
    async def _end(self, session: AcpSession) -> None:
        self.sessions.pop(session.id, None)
        await session.end(SHUTDOWN_GRACE_S)

    async def shutdown(self) -> None:
        """The editor went away: end every turn (killing running commands), then the sessions."""
        for session in list(self.sessions.values()):
            session.cancel()
        async with anyio.create_task_group() as group:
            for session in list(self.sessions.values()):
                group.start_soon(self._end, session)
