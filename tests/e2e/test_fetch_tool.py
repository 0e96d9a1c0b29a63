"""FetchURL through the real engine against a real HTTP server on 127.0.0.1: an HTML article,
JSON, Markdown, a latin-1 text, a redirect, a redirect loop, 404, binary content, a huge
body, a page with no readable text, a server too slow to answer, a closed port and URLs that
are not http(s)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests.tool_calls import one_step_each, results, run_turn
from tests.wire_client import Sandbox, WireProcess

ARTICLE = """<!doctype html>
<html><head><title>Release notes</title><style>body { color: red }</style>
<script>var tracking = "SCRIPT-TEXT";</script></head>
<body>
<nav><a href="/">NAV-LINK</a></nav>
<header><h1>SITE-BANNER</h1></header>
<main>
  <h1>Version 2.0</h1>
  <p>The <b>new</b> parser is   faster &amp; smaller.</p>
  <ul><li>first change</li><li>second change</li></ul>
  <pre><code>pip install thing==2.0
  --upgrade</code></pre>
  <h2>Upgrading</h2>
  <p>Call <code>thing.run()</code> as before.</p>
</main>
<footer>FOOTER-TEXT</footer>
</body></html>"""
JSON_BODY = b'{"name": "thing", "versions": [1, 2]}'
MARKDOWN = b"# Title\n\nSome *markdown*.\n"
HUGE = ("y" * 99 + "\n") * 2000  # 200 000 characters


@dataclass
class Site:
    url: str
    release: threading.Event
    agents: list[str] = field(default_factory=list[str])


@pytest.fixture
def site() -> Iterator[Site]:
    release = threading.Event()
    agents: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def reply(self, status: int, ctype: str, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            agents.append(self.headers.get("User-Agent", ""))
            routes: dict[str, tuple[int, str, bytes, dict[str, str]]] = {
                "/article": (200, "text/html; charset=utf-8", ARTICLE.encode(), {}),
                "/data.json": (200, "application/json", JSON_BODY, {}),
                "/readme.md": (200, "text/markdown", MARKDOWN, {}),
                "/latin": (200, "text/plain; charset=iso-8859-1", "café au lait\n".encode("latin-1"), {}),
                "/old": (301, "text/plain", b"", {"Location": "/article"}),
                "/loop": (302, "text/plain", b"", {"Location": "/loop"}),
                "/gone": (404, "text/html", b"<p>not here</p>", {}),
                "/logo.png": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, {}),
                "/huge": (200, "text/plain", HUGE.encode(), {}),
                "/app": (200, "text/html", b"<html><body><script>render()</script></body></html>", {}),
            }
            if self.path == "/slow":
                release.wait(20)
                self.reply(200, "text/plain", b"late")
                return
            status, ctype, body, headers = routes[self.path]
            self.reply(status, ctype, body, headers)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Site(f"http://127.0.0.1:{server.server_address[1]}", release, agents)
    release.set()
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_fetch_url_pages_documents_and_failures(sandbox: Sandbox, site: Site):
    urls = {
        "article": f"{site.url}/article",
        "json": f"{site.url}/data.json",
        "markdown": f"{site.url}/readme.md",
        "latin": f"{site.url}/latin",
        "moved": f"{site.url}/old",
        "loop": f"{site.url}/loop",
        "gone": f"{site.url}/gone",
        "binary": f"{site.url}/logo.png",
        "huge": f"{site.url}/huge",
        "app": f"{site.url}/app",
        "slow": f"{site.url}/slow",
        "refused": f"http://127.0.0.1:{closed_port()}/",
        "ftp": "ftp://example.com/file",
        "file": "file:///etc/passwd",
    }
    sandbox.scripts = one_step_each(*((key, "FetchURL", {"url": url}) for key, url in urls.items()))
    sandbox.write()
    env = {**sandbox.env(), "SOULWIRE_FETCH_TIMEOUT": "1"}
    wire = WireProcess(sandbox.argv(), env, sandbox.work)
    try:
        messages, result = run_turn(wire, answer=None)
    finally:
        site.release.set()
        wire.close()
    assert result == {"status": "finished"}
    values = results(messages)

    article = values["article"]
    assert not article["is_error"]
    assert article["message"] == "The returned content is the main text content extracted from the page."
    assert article["output"] == (
        "---\ntitle: Release notes\n---\n\n"
        "# Version 2.0\n\n"
        "The new parser is faster & smaller.\n\n"
        "- first change\n- second change\n\n"
        "```\npip install thing==2.0\n  --upgrade\n```\n\n"
        "## Upgrading\n\n"
        "Call `thing.run()` as before."
    )
    assert values["json"]["output"] == JSON_BODY.decode()
    assert values["json"]["message"] == "The returned content is the full content of the page."
    assert values["markdown"]["output"] == MARKDOWN.decode()
    assert values["latin"]["output"] == "café au lait\n"
    moved = values["moved"]["output"]
    assert f"url: {site.url}/article\n" in moved and "# Version 2.0" in moved

    huge = values["huge"]
    assert len(huge["output"]) <= 50_000 and huge["output"] == HUGE[: len(huge["output"])]
    assert "truncated" in huge["message"]

    def failure(key: str) -> tuple[str, str]:
        value = values[key]
        assert value["is_error"] and value["output"] == "", key
        return value["message"], value["display"][0]["text"]

    assert failure("gone") == (
        "Failed to fetch URL. Status: 404. This may indicate the page is not accessible or the server is down.",
        "HTTP 404 error",
    )
    assert failure("loop")[1] == "Too many redirects"
    message, brief = failure("binary")
    assert brief == "Non-text content" and "image/png" in message
    assert failure("app")[1] == "No content extracted"
    message, brief = failure("slow")
    assert brief == "Timeout" and "1 seconds" in message
    message, brief = failure("refused")
    assert brief == "Network error" and message.startswith("Failed to fetch URL due to network error:")
    assert failure("ftp")[1] == "Invalid URL"
    assert failure("file")[1] == "Invalid URL"

    assert site.agents and all(
        agent.startswith("Mozilla/5.0 (compatible; soulwire/") for agent in site.agents
    )
    assert not any(type_ == "request" for type_ in (m.get("method") for m in messages))  # nobody was asked
    assert json.dumps(values).count("SCRIPT-TEXT") == 0
