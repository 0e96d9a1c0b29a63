"""The reference's web services (spec §8.2 `[services.*]`, §9): `SearchWeb` against the
`moonshot_search` service, and FetchURL's `moonshot_fetch` service.

Both are a JSON POST to the service's `base_url` with `Authorization: Bearer <key>` (the
configured `api_key`, or the token of `soulwire login` when the service names `oauth`), the
tool call's id in `X-Msh-Tool-Call-Id` and the service's `custom_headers`. Search sends
`{text_query, limit, enable_page_crawling, timeout_seconds}` and reads `search_results`; fetch
sends `{url}` with `Accept: text/markdown` and returns the body as the page's main text."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from pydantic import BaseModel, Field, ValidationError

from soulwire import __version__
from soulwire.config.model import ServiceConfig
from soulwire.tools.base import ToolContext, ToolParams, TypedTool
from soulwire.tools.builtin.network import network_refusal
from soulwire.tools.builtin.output import MAX_OUTPUT_CHARS, clip_head
from soulwire.wire.types import ToolReturnValue, tool_error, tool_ok

USER_AGENT = f"soulwire/{__version__}"
SEARCH_TIMEOUT_S = 180.0
"""The service gives itself 30 s, but crawling the result pages can take longer."""
FETCH_TIMEOUT_S = 120.0
SERVICE_SEARCH_SECONDS = 30


class SearchWebParams(ToolParams):
    query: str = Field(description="The query text to search for.")
    limit: int = Field(
        default=5,
        ge=1,
        le=20,
        description=(
            "How many results to return. Usually leave it; when the results miss what you need, "
            "a more concrete query helps more than a larger limit."
        ),
    )
    include_content: bool = Field(
        default=False,
        description=(
            "Include the text of the result pages. This can use many tokens: avoid it with a large `limit`."
        ),
    )


class _Result(BaseModel):
    site_name: str = ""
    title: str = ""
    url: str = ""
    snippet: str = ""
    content: str = ""
    date: str = ""


class _SearchResponse(BaseModel):
    search_results: list[_Result]


async def _service_key(service: ServiceConfig) -> str:
    if service.api_key:
        return service.api_key
    if service.oauth is None:
        return ""
    from soulwire.config.credentials import access_token

    # May refresh the token over the network: a thread, so the session keeps serving.
    return await anyio.to_thread.run_sync(access_token, service.oauth)


def _headers(service: ServiceConfig, key: str, tool_call_id: str, **extra: str) -> dict[str, str]:
    return {
        "User-Agent": USER_AGENT,
        "Authorization": f"Bearer {key}",
        "X-Msh-Tool-Call-Id": tool_call_id,
        **extra,
        **service.custom_headers,
    }


async def _post(url: str, headers: dict[str, str], body: dict[str, Any], timeout: float) -> Any:
    import httpx2

    from soulwire.tls import shared_tls_context

    async with httpx2.AsyncClient(timeout=timeout, verify=shared_tls_context(httpx2)) as client:
        return await client.post(url, headers=headers, json=body)


class SearchWeb(TypedTool[SearchWebParams]):
    """Offered only when `[services.moonshot_search]` is configured. In a sandbox without
    network each search leaves it (the query goes to the service): a person approves it."""

    name = "SearchWeb"
    description = (
        "Search the internet for current information: news, documentation, release notes, blog "
        "posts, papers. Returns title, date, URL and summary of each result (and the page text "
        "with `include_content`)."
    )
    params = SearchWebParams

    def __init__(self, service: ServiceConfig) -> None:
        self._service = service

    async def execute(self, params: SearchWebParams, ctx: ToolContext) -> ToolReturnValue:
        import httpx2

        service = urlsplit(self._service.base_url).netloc or self._service.base_url
        refusal = await network_refusal(
            ctx,
            sender=self.name,
            action="search web",
            what=f"Search the web for `{params.query}` (sent to {service})",
            scope_key=params.query,
        )
        if refusal is not None:
            return refusal
        key = await _service_key(self._service)
        if not key:
            return tool_error(
                "Search service is not configured (no API key and no login). "
                "You may want to try other methods to search.",
                brief="Search service not configured",
            )
        body = {
            "text_query": params.query,
            "limit": params.limit,
            "enable_page_crawling": params.include_content,
            "timeout_seconds": SERVICE_SEARCH_SECONDS,
        }
        try:
            response = await _post(
                self._service.base_url, _headers(self._service, key, ctx.tool_call_id), body, SEARCH_TIMEOUT_S
            )
        except httpx2.TimeoutException:
            return tool_error(
                "Search request timed out. The search service may be slow or unavailable.",
                brief="Search request timed out",
            )
        except httpx2.HTTPError as exc:
            return tool_error(
                f"Search request failed: {exc}. The search service may be unavailable.",
                brief="Search request failed",
            )
        if response.status_code != 200:
            return tool_error(
                f"Failed to search. Status: {response.status_code}. "
                "This may indicate that the search service is currently unavailable.",
                brief="Failed to search",
            )
        try:
            results = _SearchResponse.model_validate_json(response.content).search_results
        except ValidationError as exc:
            return tool_error(
                f"Failed to parse search results: {exc.error_count()} problem(s), first: "
                f"{exc.errors()[0]['msg']}. The search service may be unavailable.",
                brief="Failed to parse search results",
            )
        blocks: list[str] = []
        for result in results:
            block = (
                f"Title: {result.title}\nDate: {result.date}\nURL: {result.url}\n"
                f"Summary: {result.snippet}\n\n"
            )
            if result.content:
                block += f"{result.content}\n\n"
            blocks.append(block)
        text, clipped = clip_head("---\n\n".join(blocks), MAX_OUTPUT_CHARS)
        message = f"Output truncated to the first {MAX_OUTPUT_CHARS} characters." if clipped else ""
        if not results:
            message = "The search returned no results."
        return tool_ok(output=text, message=message)


async def fetch_via_service(service: ServiceConfig, url: str, tool_call_id: str) -> ToolReturnValue:
    """A page's main content from the fetch service; an error result says why it failed
    (FetchURL then fetches the page itself)."""
    import httpx2

    key = await _service_key(service)
    if not key:
        return tool_error("Fetch service is not configured.", brief="Fetch service not configured")
    headers = _headers(service, key, tool_call_id, Accept="text/markdown")
    try:
        response = await _post(service.base_url, headers, {"url": url}, FETCH_TIMEOUT_S)
    except httpx2.TimeoutException:
        return tool_error("Failed to fetch URL via service: request timed out.", brief="Service timed out")
    except httpx2.HTTPError as exc:
        return tool_error(f"Failed to fetch URL via service: {exc}.", brief="Fetch service unreachable")
    if response.status_code != 200:
        return tool_error(
            f"Failed to fetch URL via service. Status: {response.status_code}.",
            brief="Failed to fetch URL via fetch service",
        )
    text, clipped = clip_head(response.text, MAX_OUTPUT_CHARS)
    message = "The returned content is the main content extracted from the page."
    if clipped:
        message += f" Output truncated to the first {MAX_OUTPUT_CHARS} characters."
    return tool_ok(output=text, message=message)
