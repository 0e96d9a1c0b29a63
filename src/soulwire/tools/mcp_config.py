"""Which MCP servers a session uses (spec §8.1): `--mcp-config-file` files, `--mcp-config`
JSON texts, and `<share>/mcp.json` when no file is given. Stdlib only: read at start-up."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soulwire.config.loader import ConfigError

DEFAULT_TOOL_CALL_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class MCPServerConfig:
    """One server: a command run over stdio, or a URL reached over HTTP."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list[str])
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict[str, str])
    transport: str = "http"
    auth: str | None = None
    """`"oauth"`: the server is reached with the tokens of `soulwire mcp auth NAME`."""


def load_mcp_servers(files: list[Path], texts: list[str], share_dir: Path) -> list[MCPServerConfig]:
    """All configured servers in order (a later entry with the same name replaces an earlier one).
    Raises ConfigError for an unreadable file or a malformed entry."""
    sources: list[tuple[str, str]] = []
    if not files and (share_dir / "mcp.json").is_file():
        files = [share_dir / "mcp.json"]
    for path in files:
        try:
            sources.append((str(path), path.expanduser().read_text(encoding="utf-8")))
        except OSError as exc:
            raise ConfigError(f"Cannot read MCP config file {path}: {exc.strerror or exc}") from exc
    sources.extend(("--mcp-config", text) for text in texts)
    servers: dict[str, MCPServerConfig] = {}
    for origin, text in sources:
        for server in _parse(origin, text):
            servers.pop(server.name, None)
            servers[server.name] = server
    return list(servers.values())


def tool_call_timeout_s(mcp_section: dict[str, Any]) -> float:
    """`[mcp.client] tool_call_timeout_ms` in seconds (spec §8.2)."""
    client = mcp_section.get("client")
    value = client.get("tool_call_timeout_ms") if isinstance(client, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value) / 1000
    return DEFAULT_TOOL_CALL_TIMEOUT_MS / 1000


def _parse(origin: str, text: str) -> list[MCPServerConfig]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"Invalid MCP config in {origin}: {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"Invalid MCP config in {origin}: expected a JSON object")
    entries = document.get("mcpServers", {})
    if not isinstance(entries, dict):
        raise ConfigError(f"Invalid MCP config in {origin}: `mcpServers` must be an object")
    return [_server(origin, str(name), entry) for name, entry in entries.items()]


def _server(origin: str, name: str, entry: Any) -> MCPServerConfig:
    def bad(why: str) -> ConfigError:
        return ConfigError(f"Invalid MCP server `{name}` in {origin}: {why}")

    if not isinstance(entry, dict):
        raise bad("expected an object")
    command, url = entry.get("command"), entry.get("url")
    if isinstance(command, str) and command:
        args = entry.get("args", [])
        env = entry.get("env")
        cwd = entry.get("cwd")
        if not isinstance(args, list):
            raise bad("`args` must be a list of strings")
        if env is not None and not isinstance(env, dict):
            raise bad("`env` must be an object")
        return MCPServerConfig(
            name=name,
            command=command,
            args=[str(a) for a in args],
            env={str(k): str(v) for k, v in env.items()} if env else None,
            cwd=str(cwd) if isinstance(cwd, str) and cwd else None,
        )
    if isinstance(url, str) and url:
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict):
            raise bad("`headers` must be an object")
        transport = entry.get("transport", "http")
        if transport not in ("http", "streamable-http", "streamable_http", "sse"):
            raise bad(f"unsupported transport {transport!r}")
        auth = entry.get("auth")
        if auth is not None and auth != "oauth":
            raise bad(f'unsupported auth {auth!r} (only "oauth")')
        return MCPServerConfig(
            name=name,
            url=url,
            headers={str(k): str(v) for k, v in headers.items()},
            transport=str(transport),
            auth=auth,
        )
    raise bad("needs a `command` (stdio) or a `url` (http)")
