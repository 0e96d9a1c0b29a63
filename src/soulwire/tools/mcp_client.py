"""A session's MCP servers: connected in the background through the official `mcp` SDK (imported
here, at the first connection only), their tools offered to the model, the state reported in
`StatusUpdate.mcp_status` (spec §3.2, §4 step 3, §9)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.to_thread

from soulwire.tools.base import ActionRequest, DescribedTool, ToolContext, Toolset, object_arguments, refused
from soulwire.tools.external import ExternalTool
from soulwire.tools.lifetime import tie_new_children
from soulwire.tools.mcp_config import MCPServerConfig
from soulwire.tools.sandbox import ESCAPE_BOUNDARIES, Escape, SandboxPolicy, leaving_action
from soulwire.wire.messages import MCPLoadingBegin, MCPLoadingEnd, StatusUpdate
from soulwire.wire.types import (
    BriefDisplayBlock,
    ImageURLPart,
    MCPServerStatus,
    MCPStatusSnapshot,
    MediaURL,
    TextPart,
    ToolReturnValue,
    WireModel,
    tool_error,
)

MAX_OUTPUT_CHARS = 100_000
TRUNCATION_NOTICE = (
    f"\n\n[Output truncated: exceeded {MAX_OUTPUT_CHARS} character limit. "
    "Use pagination or more specific queries to get remaining content.]"
)
ERROR_MESSAGE = "Tool returned an error. The output may be error message or incomplete output"
CONNECT_TIMEOUT_S = 30.0
"""A server that has not listed its tools by then counts as failed: a turn never waits forever."""
STOP_TIMEOUT_S = 5.0

Status = Literal["pending", "connecting", "connected", "failed", "unauthorized"]


class _Server:
    """One configured server and its live connection (a task that holds the SDK session open)."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.status: Status = "pending"
        self.error = ""
        self.tools: list[str] = []
        self.session: Any = None
        self.ready = anyio.Event()
        self.scope: anyio.CancelScope | None = None


class MCPManager:
    """Connects the configured servers once the session runs and registers their tools."""

    def __init__(
        self,
        servers: list[MCPServerConfig],
        toolset: Toolset,
        *,
        call_timeout_s: float,
        share: Path | None = None,
    ) -> None:
        self._share = share
        """Where `soulwire mcp auth` keeps OAuth tokens (`<share>/mcp-oauth/`)."""
        self._servers = [_Server(s) for s in servers]
        self._toolset = toolset
        self._call_timeout_s = call_timeout_s
        self._stop: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._running = 0

    @property
    def loading(self) -> bool:
        return any(s.status in ("pending", "connecting") for s in self._servers)

    def snapshot(self) -> MCPStatusSnapshot:
        servers = [
            MCPServerStatus(name=s.config.name, status=s.status, tools=list(s.tools)) for s in self._servers
        ]
        return MCPStatusSnapshot(
            loading=self.loading,
            connected=sum(s.status == "connected" for s in self._servers),
            total=len(self._servers),
            tools=sum(len(s.tools) for s in self._servers),
            servers=servers,
        )

    def start(self, group: anyio.abc.TaskGroup) -> None:
        """Start connecting every server (idempotent), each held open by a task of `group`
        (the session's): the SDK's transports must be entered and left in one task."""
        if self._stop is not None:
            return
        self._stop = anyio.Event()
        self._stopped = anyio.Event()
        self._running = len(self._servers)
        for server in self._servers:
            server.scope = anyio.CancelScope()
            group.start_soon(self._hold, server, name=f"mcp:{server.config.name}")

    async def settle(self, emit: Callable[[WireModel], None]) -> None:
        """At a turn's start: wait for servers still connecting, bracketed by the loading
        events (nothing is emitted when every server has settled)."""
        if self._stop is None or not self.loading:
            return  # not started (no session task group yet) or every server settled
        emit(StatusUpdate(mcp_status=self.snapshot()))
        emit(MCPLoadingBegin())
        try:
            for server in self._servers:
                await server.ready.wait()
        finally:
            emit(StatusUpdate(mcp_status=self.snapshot()))
            emit(MCPLoadingEnd())

    async def aclose(self) -> None:
        """Close every connection; the SDK ends each stdio server (stdin closed, then signals)."""
        if self._stop is None or self._stopped is None:
            return
        self._stop.set()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await self._stopped.wait()
        if self._stopped.is_set():
            return
        for server in self._servers:  # still not closed: cut them off
            if server.scope is not None:
                server.scope.cancel()
        with anyio.move_on_after(STOP_TIMEOUT_S):
            await self._stopped.wait()

    async def _hold(self, server: _Server) -> None:
        assert server.scope is not None
        scope = server.scope
        try:
            with scope:
                await self._connect_and_hold(server)
            if scope.cancelled_caught and not scope.cancel_called and server.status != "connected":
                server.error = f"no answer within {CONNECT_TIMEOUT_S:g} s"
                _log(f"MCP server `{server.config.name}` failed: {server.error}")
        finally:
            self._running -= 1
            if self._running == 0 and self._stopped is not None:
                self._stopped.set()

    async def _connect_and_hold(self, server: _Server) -> None:
        server.status = "connecting"
        try:
            # The SDK's first import takes a while: a thread does it, the event loop keeps serving.
            await anyio.to_thread.run_sync(_import_sdk)
            # The connect timeout is the deadline of the server's own scope, which also holds
            # the transports' task groups (entered and left in it); lifted once connected.
            assert server.scope is not None
            server.scope.deadline = anyio.current_time() + CONNECT_TIMEOUT_S
            async with AsyncExitStack() as stack:
                session = await self._connect(server.config, stack)
                listing = await _list_tools(session)
                server.scope.deadline = math.inf
                server.session = session
                for tool in listing:
                    self._register(server, tool)
                server.status = "connected"
                server.ready.set()
                assert self._stop is not None
                await self._stop.wait()
        except Exception as exc:
            server.error = _describe(exc)
            if server.error == "authorization required":
                server.error = f"authorization required: run `soulwire mcp auth {server.config.name}`"
                _log(f"MCP server `{server.config.name}`: {server.error}")
                server.status = "unauthorized"
                return
            _log(f"MCP server `{server.config.name}` failed: {server.error}")
            server.status = "failed"
        finally:
            server.session = None
            if not server.ready.is_set() and server.status != "unauthorized":
                server.status = "failed"
            server.ready.set()

    async def _connect(self, config: MCPServerConfig, stack: AsyncExitStack) -> Any:
        return await open_session(config, stack, share=self._share)

    def _register(self, server: _Server, tool: Any) -> None:
        name = str(tool.name)
        existing = self._toolset.get(name)
        # Like the reference: an MCP tool replaces a client tool of the same name (in its place),
        # never a built-in one.
        if existing is not None and not isinstance(existing, MCPTool | ExternalTool):
            _log(f"MCP tool `{name}` of `{server.config.name}` is ignored: the name is taken")
            return
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
        description = tool.description or "No description provided."
        self._toolset.add(MCPTool(self, server, name, description, schema))
        server.tools.append(name)

    async def call(self, server: _Server, name: str, arguments: dict[str, Any]) -> ToolReturnValue:
        session = server.session
        if session is None:
            why = f": {server.error}" if server.error else ""
            message = f"MCP server `{server.config.name}` is not connected{why}"
            return tool_error(message, brief="MCP server unavailable")
        try:
            with anyio.fail_after(self._call_timeout_s):
                result = await session.call_tool(name, arguments)
        except TimeoutError:
            message = (
                f"Timeout while calling MCP tool `{name}` ({self._call_timeout_s:g} s); "
                "the call was abandoned."
            )
            return tool_error(message, brief="Timeout")
        except Exception as exc:
            where = f"MCP tool `{name}` of server `{server.config.name}`"
            return tool_error(f"Error calling {where}: {_describe(exc)}", brief="MCP tool error")
        return convert_result(result)


class MCPTool(DescribedTool):
    """A tool of an MCP server, offered under the server's own name for it."""

    def __init__(
        self, manager: MCPManager, server: _Server, name: str, description: str, schema: dict[str, Any]
    ) -> None:
        origin = f"This is an MCP (Model Context Protocol) tool from MCP server `{server.config.name}`."
        super().__init__(name, f"{origin}\n\n{description}", schema)
        self._manager = manager
        self._server = server

    async def run(self, arguments: str | None, ctx: ToolContext) -> ToolReturnValue:
        value = object_arguments(arguments)
        if isinstance(value, ToolReturnValue):
            return value
        action, description = f"mcp:{self._name}", f"Call MCP tool `{self._name}`."
        sandboxed = ctx.sandbox is not None and ctx.sandbox.active
        escape = _escape(ctx.sandbox, self._server.config)
        crossing = ESCAPE_BOUNDARIES[escape] if escape is not None else None
        display: list[BriefDisplayBlock] = []
        if escape is not None and crossing is not None:
            action = leaving_action(action, escape)
            description = f"Call MCP tool `{self._name}` — it leaves the sandbox: {crossing}"
            display.append(BriefDisplayBlock(text=f"Leaves the sandbox: {crossing}"))
        request = ActionRequest(
            tool_call_id=ctx.tool_call_id,
            sender=self._name,
            action=action,
            description=description,
            display=display,
            confined=sandboxed and crossing is None,
            crossing=crossing,
        )
        refusal = await refused(ctx, request)
        if refusal is not None:
            return refusal
        return await self._manager.call(self._server, self._name, value)


def _escape(sandbox: SandboxPolicy | None, config: MCPServerConfig) -> Escape | None:
    """How a call to the server's tool leaves the session's sandbox: a stdio server is a
    process the engine started outside it (it sees and may change everything the user can);
    a remote one is reached over the network."""
    if sandbox is None or not sandbox.active:
        return None
    if config.command is not None:
        return "full"
    return None if sandbox.network else "network"


def convert_result(result: Any) -> ToolReturnValue:
    """An SDK CallToolResult as a tool result, a list of content parts as the reference sends:
    text stays text, images become image parts, other content is described; the text is capped
    at MAX_OUTPUT_CHARS with a notice for the model."""
    parts: list[TextPart | ImageURLPart] = []
    budget = MAX_OUTPUT_CHARS
    truncated = False
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "image" and getattr(item, "data", None):
            url = f"data:{item.mime_type};base64,{item.data}"
            parts.append(ImageURLPart(image_url=MediaURL(url=url)))
            continue
        text = str(item.text) if kind == "text" else f"[{kind or 'unknown'} content]"
        if truncated:
            continue
        if len(text) > budget:
            text, truncated = text[:budget], True
        budget -= len(text)
        if text:
            parts.append(TextPart(text=text))
    if not parts and getattr(result, "structured_content", None) is not None:
        import json

        parts.append(TextPart(text=json.dumps(result.structured_content)[:MAX_OUTPUT_CHARS]))
    if truncated:
        parts.append(TextPart(text=TRUNCATION_NOTICE))
    if getattr(result, "is_error", False):
        return ToolReturnValue(is_error=True, output=list(parts), message=ERROR_MESSAGE)
    return ToolReturnValue(is_error=False, output=list(parts), message="")


async def open_session(
    config: MCPServerConfig, stack: AsyncExitStack, *, share: Path | None = None, auth: Any = None
) -> Any:
    """An initialised SDK ClientSession to the server, its transports entered in `stack`. An
    HTTP server with `auth = "oauth"` uses the stored tokens of `share` (or `auth` when given:
    the `soulwire mcp auth` flow)."""
    from mcp.client.session import ClientSession

    if config.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=config.command, args=config.args, env=config.env, cwd=config.cwd
        )
        read, write = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        tie_new_children()  # the SDK does not tell the server's pid
    else:
        read, write = await stack.enter_async_context(_http_transport(config, stack, share, auth))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def list_tools(session: Any) -> list[Any]:
    """Every tool of the server (all pages)."""
    return await _list_tools(session)


def _import_sdk() -> None:
    import importlib

    for module in ("mcp.client.session", "mcp.client.stdio"):
        importlib.import_module(module)


async def _list_tools(session: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        if cursor is None:
            page = await session.list_tools()
        else:
            from mcp import types

            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return tools


def _http_transport(config: MCPServerConfig, stack: AsyncExitStack, share: Path | None, auth: Any) -> Any:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert config.url is not None
    if auth is None and config.auth == "oauth" and share is not None:
        from soulwire.tools.mcp_oauth import oauth_provider

        auth = oauth_provider(share, config.url)
    if config.transport == "sse":
        from mcp.client.sse import sse_client

        return sse_client(config.url, headers=config.headers or None, auth=auth)
    client = create_mcp_http_client(headers=config.headers or None, auth=auth)
    stack.push_async_callback(client.aclose)
    return streamable_http_client(config.url, http_client=client)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


def _log(line: str) -> None:
    try:
        sys.stderr.write(f"soulwire: {line}\n")
    except (OSError, ValueError):
        pass
