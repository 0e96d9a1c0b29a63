"""`soulwire mcp add|remove|list|test|auth|reset-auth` as a user runs them, with the sessions that
read `<share>/mcp.json`: stdio, SSE and streamable-HTTP servers, and an OAuth-protected HTTP
server (the SDK's own authorization server on 127.0.0.1) authorized through a "browser" that
follows the redirect, its tokens used and refreshed by a real engine."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.tool_calls import call, results, run_turn
from tests.wire_client import Sandbox, WireProcess, payloads

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
TINY = str(SERVERS / "tiny_server.py")
GUARDED = str(SERVERS / "oauth_server.py")
BROWSER = """import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=30) as page:
    assert page.status == 200, page.status
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def http_server(*argv: str, port: int) -> Iterator[None]:
    server = subprocess.Popen([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the MCP server did not start"
                time.sleep(0.05)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)


def mcp(sandbox: Sandbox, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    sandbox.write()
    return subprocess.run(
        [sys.executable, "-m", "soulwire", "mcp", *args],
        env={**sandbox.env(), **(env or {})},
        cwd=sandbox.work,
        capture_output=True,
        text=True,
        timeout=90,
    )


def session(sandbox: Sandbox, *scripts: str) -> tuple[list[dict], dict]:
    """One turn of a real engine that reads `<share>/mcp.json` (no --mcp-config given)."""
    sandbox.scripts = list(scripts)
    sandbox.write()
    wire = WireProcess(sandbox.argv("--yolo"), sandbox.env(), sandbox.work)
    try:
        wire.initialize()
        messages, result = run_turn(wire)
    finally:
        wire.close()
    return messages, result


def test_add_list_remove_and_usage_errors(sandbox: Sandbox):
    added = mcp(
        sandbox, "add", "--transport", "stdio", "-e", "A=1", "local", "--", sys.executable, TINY, "-x"
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == f"Added MCP server 'local' to {sandbox.share / 'mcp.json'}.\n"
    assert (
        mcp(sandbox, "add", "-t", "http", "-H", "X-Key: v 1", "remote", "http://127.0.0.1:9/mcp").returncode
        == 0
    )
    assert mcp(sandbox, "add", "-t", "sse", "old", "http://127.0.0.1:9/sse").returncode == 0
    assert (
        mcp(sandbox, "add", "-t", "http", "-a", "oauth", "guarded", "http://127.0.0.1:9/mcp").returncode == 0
    )
    assert json.loads((sandbox.share / "mcp.json").read_text()) == {
        "mcpServers": {
            "local": {"command": sys.executable, "args": [TINY, "-x"], "env": {"A": "1"}},
            "remote": {"url": "http://127.0.0.1:9/mcp", "transport": "http", "headers": {"X-Key": "v 1"}},
            "old": {"url": "http://127.0.0.1:9/sse", "transport": "sse"},
            "guarded": {"url": "http://127.0.0.1:9/mcp", "transport": "http", "auth": "oauth"},
        }
    }
    listing = mcp(sandbox, "list")
    assert listing.stdout.splitlines() == [
        f"MCP config file: {sandbox.share / 'mcp.json'}",
        f"  local (stdio): {sys.executable} {TINY} -x",
        "  remote (http): http://127.0.0.1:9/mcp",
        "  old (sse): http://127.0.0.1:9/sse",
        "  guarded (http): http://127.0.0.1:9/mcp [authorization required - run: soulwire mcp auth guarded]",
    ]
    removed = mcp(sandbox, "remove", "old")
    assert removed.returncode == 0 and "Removed MCP server 'old'" in removed.stdout
    assert "old" not in json.loads((sandbox.share / "mcp.json").read_text())["mcpServers"]

    def failure(*args: str) -> tuple[int, str]:
        done = mcp(sandbox, *args)
        assert "Traceback" not in done.stderr
        return done.returncode, done.stderr.strip().splitlines()[-1]

    assert failure("remove", "nope") == (1, "MCP server 'nope' not found.")
    assert failure("add", "x", "--header", "A: b", "--", "cmd") == (
        1,
        "--header is only valid for http transport.",
    )
    assert failure("add", "-t", "http", "x") == (1, "URL is required for http transport.")
    assert failure("add", "-t", "http", "-e", "A=1", "x", "http://h") == (
        1,
        "--env is only supported for stdio transport.",
    )
    assert failure("auth", "local") == (1, "MCP server 'local' is not a remote server.")
    assert failure("auth", "remote") == (
        1,
        "MCP server 'remote' does not use OAuth. Add it with --auth oauth.",
    )
    assert failure("add", "-t", "ftp", "x")[0] == 2
    assert failure("test", "remote")[0] == 1  # nothing listens on port 9


def test_test_command_and_sessions_over_stdio_and_sse(sandbox: Sandbox):
    assert mcp(sandbox, "add", "local", "--", sys.executable, TINY, "local").returncode == 0
    tested = mcp(sandbox, "test", "local")
    assert tested.returncode == 0, tested.stderr
    lines = tested.stdout.splitlines()
    assert lines[:3] == ["Testing connection to 'local'...", "✓ Connected to 'local'", "  Available tools: 7"]
    assert "    - shout: Echo the text back, upper-cased." in lines

    port = free_port()
    with http_server(TINY, "sse", "", str(port), "sse", port=port):
        assert mcp(sandbox, "remove", "local").returncode == 0
        assert mcp(sandbox, "add", "-t", "sse", "streamed", f"http://127.0.0.1:{port}/sse").returncode == 0
        tested = mcp(sandbox, "test", "streamed")
        assert tested.returncode == 0, tested.stderr
        assert "✓ Connected to 'streamed'" in tested.stdout
        messages, result = session(sandbox, call("s1", "shout", {"text": "over sse"}), "text: done")
    assert result["status"] == "finished"
    assert results(messages)["s1"]["output"] == [{"type": "text", "text": "OVER SSE"}]


def test_oauth_authorization_then_sessions_use_and_refresh_the_tokens(sandbox: Sandbox, tmp_path: Path):
    port, log = free_port(), tmp_path / "token-endpoint.log"
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER)
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(GUARDED, str(port), str(log), port=port):
        assert mcp(sandbox, "add", "-t", "http", "--auth", "oauth", "guarded", url).returncode == 0

        # Not authorized yet: the session reports it, and keeps working.
        messages, result = session(sandbox, call("w0", "whoami", {}), "text: done")
        assert result["status"] == "finished"
        final = [p["mcp_status"] for p in payloads(messages, "StatusUpdate") if p.get("mcp_status")][-1]
        assert final["servers"] == [{"name": "guarded", "status": "unauthorized", "tools": []}]
        assert results(messages)["w0"]["is_error"]
        untested = mcp(sandbox, "test", "guarded")
        assert untested.returncode == 1
        assert "authorization required - run: soulwire mcp auth guarded" in untested.stderr

        authorized = mcp(sandbox, "auth", "guarded", env={"BROWSER": f"{sys.executable} {browser} %s"})
        assert authorized.returncode == 0, authorized.stderr
        assert authorized.stdout.splitlines()[-2:] == [
            "Successfully authorized with 'guarded'.",
            "Available tools: 1",
        ]
        assert f"http://127.0.0.1:{port}/authorize?" in authorized.stdout
        (token_file,) = (sandbox.share / "mcp-oauth").iterdir()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert "[authorization required" not in mcp(sandbox, "list").stdout

        messages, _ = session(sandbox, call("w1", "whoami", {}), "text: done")
        assert results(messages)["w1"]["output"] == [{"type": "text", "text": "an authorized client"}]
        assert log.read_text().split() == ["code"]

        # About to expire: the next session refreshes first, and stores the new token.
        stored = json.loads(token_file.read_text())
        stored["expires_at"] = time.time() + 5
        token_file.write_text(json.dumps(stored))
        messages, _ = session(sandbox, call("w2", "whoami", {}), "text: done")
        assert results(messages)["w2"]["output"] == [{"type": "text", "text": "an authorized client"}]
        assert log.read_text().split() == ["code", "refresh"]
        renewed = json.loads(token_file.read_text())
        assert renewed["tokens"]["access_token"] != stored["tokens"]["access_token"]
        assert renewed["expires_at"] > time.time() + 3000

        reset = mcp(sandbox, "reset-auth", "guarded")
        assert reset.returncode == 0 and reset.stdout == "OAuth tokens cleared for 'guarded'.\n"
        assert not token_file.exists()
        assert "[authorization required - run: soulwire mcp auth guarded]" in mcp(sandbox, "list").stdout
