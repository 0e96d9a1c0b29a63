"""ACP v2 (alpha), off by default: with `SOULWIRE_ACP_V2=1` in the agent's environment, an
editor that asks for `protocolVersion` 2 gets 2 and the v2 behaviour the ACP Python SDK 0.12
can already carry; any other editor (and every editor without the variable) gets v1 as it is.
Stdlib only: the start-up path answers `initialize` with it.

What v2 changes, and what this path does (docs/acp.md has the whole list):
- the session modes API is gone: no `modes` in session answers, no `current_mode_update`,
  `session/set_mode` is not found; the mode is the `mode` config option;
- the client's `fs/*` and `terminal/*` methods are gone: the tools use the disk and run
  commands themselves whatever the editor declares;
- `session/load` is gone: `session/resume` replays the history when asked (`replayFrom`,
  read from `_meta` until the SDK has the field);
- `tool_call` is gone: a tool call's first update is a `tool_call_update` (an upsert);
- the plan is item-based: `plan_update` (`{"type": "items", "planId", "entries"}`);
- the HTTP+SSE MCP transport is gone: only stdio and HTTP servers are advertised."""

from __future__ import annotations

import os
from typing import Any

ENV = "SOULWIRE_ACP_V2"
VERSION = 2
PLAN_ID = "todo"
"""The one plan a session has (its todo list)."""


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def negotiate(asked: int) -> int:
    """The protocol version of a connection whose editor asked for `asked`."""
    return VERSION if asked >= VERSION and enabled() else 1


def adapt_initialize(result: dict[str, Any]) -> dict[str, Any]:
    """A v1 `initialize` result as this agent answers a v2 editor."""
    capabilities = result["agentCapabilities"]
    capabilities["loadSession"] = False
    capabilities["mcpCapabilities"] = {"http": True}
    result["protocolVersion"] = VERSION
    return result


def gone(method: str) -> Exception:
    """The "method not found" of a v1 method on a v2 connection."""
    from acp import RequestError

    return RequestError(-32601, f"Method not found: {method} (not part of ACP v2)", {"method": method})


def replay_asked(meta: dict[str, Any]) -> bool:
    """`session/resume` asked for the history (`replayFrom`; v2's `session/load`)."""
    return meta.get("replayFrom") is not None


__all__ = ["ENV", "PLAN_ID", "VERSION", "adapt_initialize", "enabled", "gone", "negotiate", "replay_asked"]
