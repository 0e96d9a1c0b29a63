"""`soulwire doctor`'s MCP check: start every configured server the way a session does
(the same manager), list its tools, and close it again."""

from __future__ import annotations

from typing import Any

import anyio

from soulwire.tools.base import Toolset
from soulwire.tools.mcp_client import MCPManager
from soulwire.tools.mcp_config import MCPServerConfig


async def probe_servers(servers: list[MCPServerConfig], timeout_s: float) -> list[dict[str, Any]]:
    """Each server's name, status (`connected`/`failed`/…), tools and error."""
    manager = MCPManager(servers, Toolset(), call_timeout_s=timeout_s)
    results: list[dict[str, Any]] = []
    async with anyio.create_task_group() as group:
        manager.start(group)
        with anyio.move_on_after(timeout_s):
            await manager.settle(lambda _event: None)
        results = [
            {"name": s.config.name, "status": s.status, "tools": list(s.tools), "error": s.error}
            for s in manager._servers
        ]
        await manager.aclose()
        group.cancel_scope.cancel()
    return results
