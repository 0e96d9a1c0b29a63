"""MCP servers defined in process (official `mcp` SDK objects) bridged as external tools,
against the real `soulwire --wire` with the scripted model."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

import soulwire.sdk as sdk

from .conftest import Engine
from .test_engines import call

pytestmark = pytest.mark.anyio


def make_server() -> MCPServer:
    server = MCPServer("calc")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:  # pyright: ignore[reportUnusedFunction]
        return a + b

    @server.tool(description="Always fails.")
    def explode(reason: str) -> str:  # pyright: ignore[reportUnusedFunction]
        raise ToolError(f"exploded: {reason}")  # a deliberate failure: its text reaches the model

    return server


async def test_the_model_calls_an_in_process_mcp_tool(soulwire: Engine):
    options = sdk.Options(
        **soulwire.options(
            call("c1", "add", {"a": 2, "b": 40}) + "\n" + call("c2", "explode", {"reason": "on purpose"}),
            "text: the sum is 42",
        ),
        mcp_servers={"calc": make_server()},
    )
    messages = [m async for m in sdk.query("add 2 and 40", options)]
    results = {m.tool_use_id: m for m in messages if isinstance(m, sdk.ToolResultMessage)}
    assert not results["c1"].is_error and results["c1"].output == "42"
    assert results["c2"].is_error and "exploded: on purpose" in results["c2"].message
    assert messages[-1].text == "the sum is 42"  # pyright: ignore[reportAttributeAccessIssue]


async def test_bridged_tools_are_registered_with_the_servers_schema(soulwire: Engine):
    async with sdk.Session(**soulwire.options(), mcp_servers={"calc": make_server()}) as session:
        assert sorted(session.accepted_tools) == ["add", "explode"]
        spec = session.tools["add"].spec()
        assert spec["parameters"]["required"] == ["a", "b"]
        assert "in-process MCP server `calc`" in spec["description"]


async def test_a_name_clash_with_a_tool_is_an_error(soulwire: Engine):
    @sdk.tool
    def add(a: int, b: int) -> int:
        """Another add."""
        return a + b

    with pytest.raises(sdk.ToolDefinitionError, match="two external tools are named 'add'"):
        async with sdk.Session(**soulwire.options(), tools=[add], mcp_servers={"calc": make_server()}):
            pass


def test_not_a_server_is_a_configuration_error():
    with pytest.raises(sdk.ConfigurationError, match="not an MCP server"):
        sdk.Options(mcp_servers={"calc": object()})
    with pytest.raises(sdk.ConfigurationError, match="letters, digits"):
        sdk.Options(mcp_servers={"a b": make_server()})
