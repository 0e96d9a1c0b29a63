"""A tiny stdio MCP server for the e2e tests, written with the official SDK's server API.

Run as `python tiny_server.py [NAME] [PIDFILE] [PORT]`: NAME is the server's own name; PIDFILE,
when not empty, receives this process's pid so a test can check it has exited; PORT, when given,
serves streamable HTTP on 127.0.0.1:PORT/mcp instead of stdio (or SSE on PORT/sse when a
fourth argument `sse` is given)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Image, MCPServer

name = sys.argv[1] if len(sys.argv) > 1 else "tiny"
if len(sys.argv) > 2 and sys.argv[2]:
    with Path(sys.argv[2]).open("a", encoding="utf-8") as pids:
        pids.write(f"{os.getpid()}\n")

server = MCPServer(name)


@server.tool(description="Echo the text back, upper-cased.")
def shout(text: str) -> str:
    return text.upper()


@server.tool(description="Always fails.")
def explode(reason: str = "boom") -> str:
    raise ValueError(f"exploded: {reason}")


@server.tool(description="Sleep, then answer.")
def slow(seconds: float) -> str:
    time.sleep(seconds)  # (the scenario: a slow tool)
    return f"slept {seconds}"


@server.tool(description="A long text.")
def big(n: int) -> str:
    return "x" * n


@server.tool(description="A 1x1 PNG image.")
def pixel() -> Image:
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
    return Image(data=png, format="png")


@server.tool(description="End the server process at once.")
def die() -> str:
    os._exit(1)


@server.tool(description="A tool whose name clashes with a client tool.")
def client_clash() -> str:
    return "mcp side"


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[4] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[3]))
    elif len(sys.argv) > 3:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
