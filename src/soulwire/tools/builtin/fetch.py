"""`FetchURL`: a web page's main text (HTML reduced to light Markdown), or a text, JSON or
Markdown document as it is.

Fetched directly with httpx2 (the HTTP client the provider SDKs already bring), imported at the
first call so that start-up does not pay for it. With `[services.moonshot_fetch]` configured the
page is asked of that service first (tools/builtin/web_service.py), and fetched directly when the
service fails, as the reference does."""

from __future__ import annotations

import codecs
import os
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

import anyio
from pydantic import Field

from soulwire import __version__
from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.tools.builtin.network import network_refusal
from soulwire.tools.builtin.output import MAX_LINE_CHARS, MAX_OUTPUT_CHARS, cap_lines, clip_head
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

if TYPE_CHECKING:
    from soulwire.config.model import ServiceConfig

MAX_FETCH_BYTES = 10 * 1024 * 1024
"""Bodies are read up to this size; the rest of a larger page is not downloaded."""
MAX_REDIRECTS = 10
TIMEOUT_ENV = "SOULWIRE_FETCH_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
"""Whole fetch (connect, redirects, body); `SOULWIRE_FETCH_TIMEOUT` overrides it."""
USER_AGENT = f"Mozilla/5.0 (compatible; soulwire/{__version__}; FetchURL)"
ACCEPT = "text/html,application/xhtml+xml,text/markdown,text/plain,application/json;q=0.9,*/*;q=0.5"

_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
        "application/graphql",
    }
)
_BINARY_MAJOR = frozenset({"image", "audio", "video", "font", "model"})

NO_CONTENT = (
    "Failed to extract meaningful content from the page. This may indicate the page content is "
    "not suitable for text extraction, or the page requires JavaScript to render its content."
)


class FetchURLParams(ToolParams):
    url: str = Field(description="The http or https URL to fetch.")


class _Page(NamedTuple):
    url: str
    """Where the page was found, after redirects."""
    status: int
    content_type: str
    charset: str | None
    body: bytes
    cut: bool
    """The body was longer than MAX_FETCH_BYTES and only its head was read."""


def fetch_timeout() -> float:
    try:
        value = float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value > 0 else DEFAULT_TIMEOUT_S


async def _get(url: str, timeout: float) -> _Page:
    import httpx2

    from soulwire.tls import shared_tls_context

    headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
    async with (
        httpx2.AsyncClient(
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            timeout=timeout,
            headers=headers,
            verify=shared_tls_context(httpx2),  # not a new one (the CA bundle) per call
        ) as client,
        client.stream("GET", url) as response,
    ):
        body = bytearray()
        cut = False
        if response.status_code < 400:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_FETCH_BYTES:
                    del body[MAX_FETCH_BYTES:]
                    cut = True
                    break
        content_type, charset = _content_type(response.headers.get("content-type", ""))
        return _Page(str(response.url), response.status_code, content_type, charset, bytes(body), cut)


def _content_type(header: str) -> tuple[str, str | None]:
    main, *params = header.split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return main.strip().lower(), charset


class FetchURL(TypedTool[FetchURLParams]):
    name = "FetchURL"
    description = (
        "Fetch a web page and return its main text: HTML is reduced to headings, paragraphs, lists, "
        "tables and code blocks (navigation, scripts and page chrome dropped); plain text, Markdown "
        "and JSON come back as they are. Only http and https URLs; binary content (images, PDFs, "
        "archives) is refused. Pages that need JavaScript to render may come back empty."
    )
    params = FetchURLParams

    def __init__(self, service: ServiceConfig | None = None) -> None:
        self._service = service

    async def execute(self, params: FetchURLParams, ctx: ToolContext) -> ToolReturnValue:
        url = params.url.strip()
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            return tool_error(
                f"`{params.url}` is not an http or https URL; FetchURL fetches web pages only.",
                brief="Invalid URL",
            )
        refusal = await network_refusal(
            ctx, sender=self.name, action="fetch URL", what=f"Fetch `{url}`", scope_key=url
        )
        if refusal is not None:
            return refusal
        if self._service is not None:
            from soulwire.tools.builtin.web_service import fetch_via_service

            served = await fetch_via_service(self._service, url, ctx.tool_call_id)
            if not served.is_error:
                return served
        import httpx2

        timeout = fetch_timeout()
        try:
            with anyio.fail_after(timeout):
                page = await _get(url, timeout)
        except (TimeoutError, httpx2.TimeoutException):
            return tool_error(
                f"Failed to fetch URL: `{url}` did not answer completely within {timeout:g} seconds.",
                brief="Timeout",
            )
        except httpx2.TooManyRedirects:
            return tool_error(
                f"Failed to fetch URL: `{url}` redirected more than {MAX_REDIRECTS} times.",
                brief="Too many redirects",
            )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            return tool_error(
                f"Failed to fetch URL due to network error: {exc or type(exc).__name__}. "
                "This may indicate the URL is invalid or the server is unreachable.",
                brief="Network error",
            )
        return _page_result(url, page)


def _page_result(url: str, page: _Page) -> ToolReturnValue:
    if page.status >= 400:
        return tool_error(
            f"Failed to fetch URL. Status: {page.status}. "
            "This may indicate the page is not accessible or the server is down.",
            brief=f"HTTP {page.status} error",
        )
    kind = _kind(page)
    if kind is None:
        return tool_error(
            f"`{url}` returned {page.content_type or 'binary'} content, which is not text. FetchURL "
            "reads web pages and text documents; download other files with Shell (e.g. curl) instead.",
            brief="Non-text content",
        )
    text = _decode(page)
    notes: list[str] = []
    if kind == "html":
        from soulwire.tools.builtin.htmltext import html_to_text  # html.parser: at first use only

        extracted = html_to_text(text)
        if not extracted.text.strip():
            return tool_error(NO_CONTENT, brief="No content extracted")
        front = [f"title: {extracted.title}"] if extracted.title else []
        if page.url != url:
            front.append(f"url: {page.url}")
        text = ("---\n" + "\n".join(front) + "\n---\n\n" if front else "") + extracted.text
        notes.append("The returned content is the main text content extracted from the page.")
    else:
        notes.append("The returned content is the full content of the page.")
    if page.cut:
        notes.append(
            f"The page is larger than {MAX_FETCH_BYTES // (1024 * 1024)} MB; only its beginning was read."
        )
    text, cut_lines = cap_lines(text)
    text, clipped = clip_head(text, MAX_OUTPUT_CHARS)
    if clipped:
        notes.append(f"Output truncated to the first {MAX_OUTPUT_CHARS} characters.")
    if cut_lines:
        notes.append(f"{cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut.")
    return tool_ok(output=text, message=" ".join(notes))


def _kind(page: _Page) -> str | None:
    """ "html", "text", or None for content that is not text."""
    from soulwire.tools.builtin.mediatypes import looks_like_text  # at first use only

    ctype = page.content_type
    head = page.body[:4096]
    if ctype in _HTML:
        return "html"
    if ctype.startswith("text/") or ctype in _TEXT or ctype.endswith(("+json", "+xml")):
        return "text"
    if ctype.split("/", 1)[0] in _BINARY_MAJOR or not looks_like_text(head):
        return None
    # Missing or generic type (application/octet-stream …) on a body that is text.
    start = head.lstrip()[:512].lower()
    return "html" if start.startswith((b"<!doctype html", b"<html")) else "text"


def _decode(page: _Page) -> str:
    encoding = "utf-8"
    if page.charset:
        try:
            encoding = codecs.lookup(page.charset).name
        except LookupError:
            pass
    return page.body.decode(encoding, "replace")
