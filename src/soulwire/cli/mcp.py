"""`soulwire mcp add|remove|list|test|auth|reset-auth`: the MCP servers of `<share>/mcp.json`,
the file every session reads when no `--mcp-config-file` is given (same format as `kimi mcp`:
`{"mcpServers": {NAME: {"command", "args", "env"} | {"url", "transport", "headers", "auth"}}}`).

`auth` runs the OAuth browser flow for a server added with `--auth oauth` (tools/mcp_oauth.py):
the authorization URL is opened in the browser (`$BROWSER` is honoured) and a one-shot listener
on 127.0.0.1 receives the redirect; the tokens are then used by every session."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from soulwire.config.loader import ConfigError, share_dir
from soulwire.usage import CommandFailed, CommandParser

EXAMPLES = """examples:
  soulwire mcp add --transport http context7 https://mcp.context7.com/mcp --header "CONTEXT7_API_KEY: key"
  soulwire mcp add --transport http --auth oauth linear https://mcp.linear.app/mcp
  soulwire mcp auth linear
  soulwire mcp add --transport sse legacy http://127.0.0.1:9000/sse
  soulwire mcp add --transport stdio chrome-devtools -- npx chrome-devtools-mcp@latest
  soulwire mcp test chrome-devtools"""


_Parser = CommandParser  # one-line usage errors (exit 2) and examples in --help, as every command


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="soulwire mcp",
        description="Manage the MCP servers of <share>/mcp.json (used by every session).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = commands.add_parser(
        "add",
        help="add (or replace) a server",
        description="Add an MCP server. For stdio give the command after `--`; for http/sse the URL.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name", help="name of the server")
    add.add_argument("target", nargs="*", metavar="TARGET_OR_COMMAND", help="URL, or the command after `--`")
    add.add_argument("--transport", "-t", choices=("stdio", "http", "sse"), default="stdio")
    add.add_argument("--env", "-e", action="append", default=[], metavar="KEY=VALUE", help="stdio only")
    add.add_argument("--header", "-H", action="append", default=[], metavar="KEY:VALUE", help="http/sse only")
    add.add_argument("--auth", "-a", choices=("oauth",), help="authorization (http/sse only)")
    for name, text in (
        ("remove", "remove a server"),
        ("test", "connect to a server and list its tools"),
        ("auth", "authorize with an OAuth server (opens the browser)"),
        ("reset-auth", "forget a server's OAuth tokens"),
    ):
        commands.add_parser(name, help=text).add_argument("name", help="name of the server")
    commands.add_parser("list", help="list the servers")
    return parser


def run_mcp(argv: list[str]) -> int:
    command_args: list[str] = []
    if "--" in argv:  # everything after `--` is the stdio command, flags included
        cut = argv.index("--")
        argv, command_args = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    try:
        if args.command == "add":
            _add(args, [*args.target, *command_args])
        elif args.command == "remove":
            _remove(args.name)
        elif args.command == "list":
            _list()
        elif args.command == "test":
            _run_async(_test, args.name)
        elif args.command == "auth":
            _run_async(_auth, args.name)
        else:
            _reset_auth(args.name)
    except CommandFailed as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    return 0


def config_file() -> Path:
    return share_dir() / "mcp.json"


def _load() -> dict[str, Any]:
    path = config_file()
    if not path.exists():
        return {"mcpServers": {}}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CommandFailed(f"Invalid JSON in MCP config file '{path}': {exc}") from None
    from soulwire.tools.mcp_config import load_mcp_servers

    try:  # the same check a session makes
        load_mcp_servers([path], [], path.parent)
    except ConfigError as exc:
        raise CommandFailed(str(exc)) from None
    config.setdefault("mcpServers", {})
    return config


def _save(config: dict[str, Any]) -> None:
    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _server(name: str, *, remote: bool = False) -> dict[str, Any]:
    servers = _load()["mcpServers"]
    if name not in servers:
        raise CommandFailed(f"MCP server '{name}' not found.")
    if remote and "url" not in servers[name]:
        raise CommandFailed(f"MCP server '{name}' is not a remote server.")
    return servers[name]


def _pairs(items: list[str], option: str, separator: str) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for item in items:
        if separator not in item:
            raise CommandFailed(f"Invalid {option} format: {item} (expected KEY{separator}VALUE).")
        key, value = item.split(separator, 1)
        if separator == ":":
            key, value = key.strip(), value.strip()
        if not key:
            raise CommandFailed(f"Invalid {option} format: {item} (empty key).")
        parsed[key] = value
    return parsed


def _add(args: argparse.Namespace, target: list[str]) -> None:
    config = _load()
    entry: dict[str, Any]
    if args.transport == "stdio":
        if not target:
            raise CommandFailed(
                "For stdio transport, provide the command to start the MCP server after `--`."
            )
        if args.header:
            raise CommandFailed("--header is only valid for http transport.")
        if args.auth:
            raise CommandFailed("--auth is only valid for http transport.")
        entry = {"command": target[0], "args": target[1:]}
        if args.env:
            entry["env"] = _pairs(args.env, "env", "=")
    else:
        if args.env:
            raise CommandFailed("--env is only supported for stdio transport.")
        if not target:
            raise CommandFailed(f"URL is required for {args.transport} transport.")
        if len(target) > 1:
            raise CommandFailed(
                f"Multiple targets provided. Supply a single URL for {args.transport} transport."
            )
        entry = {"url": target[0], "transport": args.transport}
        if args.header:
            entry["headers"] = _pairs(args.header, "header", ":")
        if args.auth:
            entry["auth"] = args.auth
    config["mcpServers"][args.name] = entry
    _save(config)
    print(f"Added MCP server '{args.name}' to {config_file()}.")


def _remove(name: str) -> None:
    _server(name)
    config = _load()
    del config["mcpServers"][name]
    _save(config)
    print(f"Removed MCP server '{name}' from {config_file()}.")


def _list() -> None:
    config = _load()
    print(f"MCP config file: {config_file()}")
    servers: dict[str, Any] = config["mcpServers"]
    if not servers:
        print("No MCP servers configured.")
        return
    for name, server in servers.items():
        if "command" in server:
            line = f"{name} (stdio): {server['command']} {' '.join(server.get('args', []))}".rstrip()
        elif "url" in server:
            transport = server.get("transport") or "http"
            transport = "http" if transport in ("streamable-http", "streamable_http") else transport
            line = f"{name} ({transport}): {server['url']}"
            if server.get("auth") == "oauth" and not _has_tokens(server["url"]):
                line += f" [authorization required - run: soulwire mcp auth {name}]"
        else:
            line = f"{name}: {server}"
        print(f"  {line}")


def _has_tokens(url: str) -> bool:
    from soulwire.tools.mcp_oauth import FileTokenStorage

    return FileTokenStorage(share_dir(), url).has_tokens()


def _reset_auth(name: str) -> None:
    server = _server(name, remote=True)
    from soulwire.tools.mcp_oauth import FileTokenStorage

    FileTokenStorage(share_dir(), server["url"]).clear()
    print(f"OAuth tokens cleared for '{name}'.")


def _server_config(name: str, entry: dict[str, Any]) -> Any:
    from soulwire.tools.mcp_config import load_mcp_servers

    servers = load_mcp_servers([], [json.dumps({"mcpServers": {name: entry}})], share_dir())
    return next(server for server in servers if server.name == name)


def _run_async(function: Any, name: str) -> None:
    import anyio

    anyio.run(function, name)


async def _test(name: str) -> None:
    import anyio

    from soulwire.tools.mcp_client import CONNECT_TIMEOUT_S, list_tools, open_session

    config = _server_config(name, _server(name))
    print(f"Testing connection to '{name}'...")
    try:
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            async with AsyncExitStack() as stack:
                session = await open_session(config, stack, share=share_dir())
                tools = await list_tools(session)
    except Exception as exc:
        why = _describe(exc)
        if why.startswith("AuthorizationRequired"):
            why = f"authorization required - run: soulwire mcp auth {name}"
        raise CommandFailed(f"✗ Connection failed: {why}") from None
    print(f"✓ Connected to '{name}'")
    print(f"  Available tools: {len(tools)}")
    if tools:
        print("  Tools:")
        for tool in tools:
            text = tool.description or ""
            print(f"    - {tool.name}: {text[:47] + '...' if len(text) > 50 else text}")


async def _auth(name: str) -> None:
    entry = _server(name, remote=True)
    if entry.get("auth") != "oauth":
        raise CommandFailed(f"MCP server '{name}' does not use OAuth. Add it with --auth oauth.")
    import anyio

    from soulwire.cli.oauth_callback import CallbackListener
    from soulwire.tools.mcp_client import list_tools, open_session
    from soulwire.tools.mcp_oauth import FileTokenStorage, oauth_provider

    config = _server_config(name, entry)
    FileTokenStorage(share_dir(), config.url).clear()  # a fresh registration for this redirect URI
    print(f"Authorizing with '{name}'...")
    async with CallbackListener() as listener:

        async def open_browser(url: str) -> None:
            print("A browser window will open for authorization. If it does not, open this URL:")
            print(f"  {url}", flush=True)
            await anyio.to_thread.run_sync(_open_browser, url)

        auth = oauth_provider(
            share_dir(),
            config.url,
            redirect_uri=listener.redirect_uri,
            redirect_handler=open_browser,
            callback_handler=listener.wait,
        )
        try:
            with anyio.fail_after(listener.timeout_s):
                async with AsyncExitStack() as stack:
                    session = await open_session(config, stack, auth=auth)
                    tools = await list_tools(session)
        except Exception as exc:
            raise CommandFailed(f"Authorization failed: {_describe(exc)}") from None
    print(f"Successfully authorized with '{name}'.")
    print(f"Available tools: {len(tools)}")


def _open_browser(url: str) -> None:
    import webbrowser

    try:
        webbrowser.open(url)
    except Exception:  # no browser: the URL was printed
        pass


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, TimeoutError):
        return "TimeoutError: no answer in time"
    return f"{type(exc).__name__}: {exc}"
