"""The ACP agent: session bookkeeping over the runtime (`acp.Agent` protocol of the SDK)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from acp import RequestError
from acp.schema import (
    AcpMcpServer,
    ForkSessionResponse,
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

from soulwire.config.loader import ConfigError, load_raw_config
from soulwire.runtime.builder import build_runtime
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.session import SessionHeldError
from soulwire.sessions.checkpoints.book import CheckpointError
from soulwire.sessions.fork import ForkError, fork_session
from soulwire.sessions.index import known_work_dirs
from soulwire.sessions.listing import delete_session, list_sessions
from soulwire.sessions.paths import is_valid_session_id, session_dir
from soulwire.sessions.store import FileSessionStore
from soulwire.tools.sandbox import bubblewrap_problem
from soulwire.ui.acp import auth, v2
from soulwire.ui.acp.handshake import ClientCapabilities
from soulwire.ui.acp.options import sandbox_change
from soulwire.ui.acp.prompts import PromptBlock
from soulwire.ui.acp.session import AcpSession, PermissionAsker, prewarm, session_not_found
from soulwire.wire.jsonrpc import INVALID_STATE, SESSION_HELD

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
        extension: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self._base = options
        self._extension = extension  # sends an extension notification (`_soulwire/…`)
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
            raise session_not_found(session_id, f"in {work_dir}")
        options = dataclasses.replace(
            self._base,
            work_dir=work_dir,
            session_id=session_id or FileSessionStore.new_id(),
            continue_last=False,
            add_dirs=[*self._base.add_dirs, *(Path(d) for d in additional_directories or [])],
            mcp_configs=[*self._base.mcp_configs, *_mcp_config(mcp_servers)],
        )
        return await self._start(options)

    async def _start(self, options: SessionOptions) -> AcpSession:
        try:
            runtime = build_runtime(options)
        except SessionHeldError as exc:  # held elsewhere: the same reason as on Wire
            data = {"reason": SESSION_HELD, "session_id": exc.session_id, "holder": exc.holder}
            raise RequestError(INVALID_STATE, str(exc), data) from None
        except ConfigError as exc:
            raise RequestError(-32602, str(exc)) from None
        assert self._client is not None
        capabilities = self._client_capabilities()
        session = AcpSession(runtime, self._client, self._notify, capabilities, self._extension)
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
        self._not_in_v2("session/load")
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
        if session.v2 and v2.replay_asked(kwargs):
            session.replay()  # v2's `session/load`
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

    def _stored(self, session_id: str, cwd: str | None = None) -> tuple[str, Path]:
        """(work dir, directory) of a session on disk: in `cwd` when given, else wherever
        Soulwire has seen it."""
        if not is_valid_session_id(session_id):
            raise session_not_found(session_id)
        open_session = self.sessions.get(session_id)
        if open_session is not None:
            work_dirs = [str(open_session.runtime.options.work_dir)]
        else:
            work_dirs = [str(_work_dir(cwd))] if cwd else known_work_dirs(self._base.share_dir)
        for work_dir in work_dirs:
            directory = session_dir(self._base.share_dir, work_dir, session_id)
            if directory.is_dir():
                return work_dir, directory
        raise session_not_found(session_id)

    async def delete_session(self, session_id: str, **kwargs: Any) -> None:
        """Close the session if it is open, then remove it from disk (it leaves `session/list`)."""
        work_dir, _ = self._stored(session_id)
        session = self.sessions.get(session_id)
        if session is not None:
            await self._end(session)
        for summary in list_sessions(self._base.share_dir, work_dir):
            if summary.id == session_id:
                delete_session(self._base.share_dir, work_dir, summary)

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[McpServer] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        """A new session with a copy of the history (unstable `session/fork`); `_meta.turns`
        keeps only the first N turns. The source is not changed, open or not. When the source
        has checkpoints and `cwd` is another directory, missing or empty, the fork gets its own
        work dir there holding the files as at the end of those turns."""
        source_work_dir, source = self._stored(session_id)
        turns = kwargs.get("turns")
        if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool)):
            raise RequestError(-32602, "_meta.turns must be an integer")
        try:
            forked = await self._fork_with_files(session_id, source_work_dir, source, cwd, turns)
            if forked is not None:
                new_id, work_dir = forked
            else:
                work_dir = _work_dir(cwd)
                new_id, _ = fork_session(self._base.share_dir, str(work_dir), source, turns=turns)
        except (ForkError, CheckpointError) as exc:
            raise RequestError(-32602, f"Cannot fork: {exc}") from None
        session = await self._open(str(work_dir), new_id, mcp_servers, additional_directories)
        session.replay()
        self._defer(session.id, session.send_commands)
        return ForkSessionResponse(
            session_id=session.id, modes=session.modes(), config_options=list(session.config_options())
        )

    async def _fork_with_files(
        self, session_id: str, source_work_dir: str, source: Path, cwd: str, turns: int | None
    ) -> tuple[str, Path] | None:
        """(new id, its work dir) of a fork into a new work dir with the checkpoint's files;
        None when that is not asked for (same dir, a non-empty one) or there are no checkpoints."""
        from soulwire.runtime.checkpoints import fork, stored_book
        from soulwire.sessions.checkpoints.forking import fork_with_files

        target = os.path.normpath(cwd) if os.path.isabs(cwd) else None
        if target is None or target == os.path.normpath(source_work_dir):
            return None
        if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
            return None
        open_session = self.sessions.get(session_id)
        if open_session is not None and open_session.runtime.soul.workspace is not None:
            result = await fork(open_session.runtime, turn=turns, work_dir=target)
        else:
            book = stored_book(self._base.share_dir, source_work_dir, session_id)
            if not book.checkpoints():
                return None
            share = self._base.share_dir
            job = partial(fork_with_files, book, share, source, turns=turns, new_work_dir=target)
            result = await anyio.to_thread.run_sync(job)
        return str(result["session_id"]), Path(result["work_dir"])

    def _not_in_v2(self, method: str) -> None:
        if self._client_capabilities().v2:
            raise v2.gone(method)

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise session_not_found(session_id, "open it with session/new, load or resume")
        return session

    # -- turns and settings ----------------------------------------------------
    async def prompt(self, session_id: str, prompt: list[PromptBlock], **kwargs: Any) -> dict[str, Any]:
        return await self._session(session_id).prompt(prompt)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        self._not_in_v2("session/set_mode")
        self._session(session_id).set_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id == "sandbox":
            session = await self._set_sandbox(session, value)
        else:
            session.set_config_option(config_id, value)
        return SetSessionConfigOptionResponse(config_options=list(session.config_options()))

    async def _set_sandbox(self, session: AcpSession, value: str | bool) -> AcpSession:
        """The sandbox is part of how a session's tools are built: the session is opened
        again with the new mode (recorded in its state, so a later load keeps it)."""
        value = sandbox_change(value)
        if session.busy:
            raise RequestError(-32602, "The sandbox cannot change while a prompt is running")
        if value == session.sandbox_mode():
            return session
        problem = bubblewrap_problem() if value != "off" else None
        if problem is not None:
            raise RequestError(-32602, f"Cannot use the sandbox here: {problem}")
        options = dataclasses.replace(
            session.runtime.options, sandbox=value, session_id=session.id, keep_empty_session=True
        )
        await self._end(session)
        return await self._start(options)

    # -- authentication -----------------------------------------------------------
    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        await auth.authenticate(method_id, self._base.share_dir, self._base.raw_config)
        self._reload_config()

    async def logout(self, **kwargs: Any) -> None:
        await auth.logout(self._base.share_dir)
        self._reload_config()

    def _reload_config(self) -> None:
        """Sessions opened from now on read the configuration the login rewrote (unless the
        command line named its own)."""
        path = self._base.config_path
        if (path is None and not self._base.raw_config) or (
            path is not None and path.parent == self._base.share_dir
        ):
            try:
                raw, path = load_raw_config(config_file=None, config_text=None, share=self._base.share_dir)
            except ConfigError as exc:
                raise RequestError(-32603, f"The configuration is unreadable after login: {exc}") from None
            self._base = dataclasses.replace(self._base, raw_config=raw, config_path=path)

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
