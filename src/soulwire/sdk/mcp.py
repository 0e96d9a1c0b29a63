"""MCP servers defined in process: the SDK hosts an `mcp` server object and offers its tools
to the engine as external tools.

    from mcp.server.mcpserver import MCPServer

    calc = MCPServer("calc")

    @calc.tool()
    def add(a: int, b: int) -> int:
        return a + b

    async with Session(mcp_servers={"calc": calc}) as session: ...

Why a bridge and not a transport: the server object lives in this process, so the SDK
talks to it over the `mcp` SDK's in-memory streams and forwards each `ToolCallRequest` as a
`tools/call`. Nothing listens on a socket (no port, token or Host check to get right),
nothing extra is spawned, the engine needs no MCP configuration, and it works with any Wire
engine that has external tools (`kimi --wire` too). The engine validates arguments against
the tool's own JSON Schema; results keep text and images. What is not bridged: tools added
after the session started (the list is read once, at start), and MCP resources and prompts
(engines offer the model tools only). A server reached over stdio or HTTP is configured on
the engine instead (`--mcp-config`).

The `mcp` package is imported only by a session that has in-process servers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from soulwire.sdk.errors import ConfigurationError, ToolDefinitionError
from soulwire.sdk.tools import Tool
from soulwire.wire.types import ImageURLPart, MediaURL, TextPart, ToolReturnValue, tool_error

_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class _AnyArguments(BaseModel):
    """MCP tools are described by the server's JSON Schema, not by a model of ours."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool):
    """One tool of an in-process MCP server, as an external tool."""

    def __init__(self, client: Any, server: str, name: str, description: str, schema: dict[str, Any]) -> None:
        origin = f"A tool of the in-process MCP server `{server}`."
        text = f"{origin}\n\n{description}" if description else origin
        super().__init__(
            self._run,
            name=name,
            description=text,
            arguments_model=_AnyArguments,
            single_model=True,
            parameters=schema or dict(_EMPTY_OBJECT),
        )
        self.server = server
        self._client = client

    async def _run(self, arguments: dict[str, Any]) -> ToolReturnValue:
        return convert_result(await self._client.call_tool(self.name, arguments))

    async def invoke(self, arguments: str | None) -> ToolReturnValue:
        """Forward the call (the engine has checked the arguments against the schema)."""
        try:
            raw = json.loads(arguments) if arguments else {}
        except ValueError as exc:
            return tool_error(f"Invalid JSON arguments: {exc}", brief="Invalid arguments")
        if not isinstance(raw, dict):
            return tool_error("Arguments must be a JSON object", brief="Invalid arguments")
        try:
            return await self._run(raw)
        except Exception as exc:  # the server's own failure, reported to the model
            return tool_error(f"MCP tool `{self.name}` of `{self.server}` failed: {exc}", brief="MCP error")


def convert_result(result: Any) -> ToolReturnValue:
    """A `CallToolResult` as a tool result: text stays text, images become image parts,
    anything else is named; structured content is used when there is nothing else."""
    parts: list[TextPart | ImageURLPart] = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(TextPart(text=str(item.text)))
        elif kind == "image" and getattr(item, "data", None):
            url = f"data:{item.mime_type};base64,{item.data}"
            parts.append(ImageURLPart(image_url=MediaURL(url=url)))
        else:
            parts.append(TextPart(text=f"[{kind or 'unknown'} content]"))
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(TextPart(text=json.dumps(structured, ensure_ascii=False, default=str)))
    if getattr(result, "is_error", False):
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        return tool_error(text or "The MCP tool reported an error", brief="MCP tool error")
    if all(isinstance(p, TextPart) for p in parts):  # plain text reads best as one string
        return ToolReturnValue(
            is_error=False, output="".join(p.text for p in parts if isinstance(p, TextPart)), message=""
        )
    return ToolReturnValue(is_error=False, output=list(parts), message="")


async def open_servers(servers: Mapping[str, Any], stack: contextlib.AsyncExitStack) -> list[McpTool]:
    """Connect to every server (kept open by `stack`) and return their tools."""
    if not servers:
        return []
    try:
        from mcp import Client
    except ImportError as exc:  # pragma: no cover - mcp is a dependency
        raise ConfigurationError(f"mcp_servers needs the `mcp` package: {exc}") from exc
    tools: list[McpTool] = []
    for name, server in servers.items():
        try:
            client: Any = await stack.enter_async_context(Client(server))
        except TypeError as exc:
            raise ConfigurationError(f"mcp_servers[{name!r}] is not an MCP server object: {exc}") from exc
        for spec in await _list_tools(client):
            schema = getattr(spec, "input_schema", None)
            try:
                tools.append(
                    McpTool(client, name, str(spec.name), str(spec.description or ""), dict(schema or {}))
                )
            except ToolDefinitionError as exc:
                raise ToolDefinitionError(f"MCP server {name!r}: {exc}") from exc
    return tools


async def _list_tools(client: Any) -> list[Any]:
    found: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        found.extend(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return found


__all__ = ["McpTool", "convert_result", "open_servers"]
