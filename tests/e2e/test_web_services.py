"""SearchWeb and FetchURL's fetch service (`[services.moonshot_search]`, `[services.moonshot_fetch]`)
through the real engine against a fake service on 127.0.0.1: the request format, the answer, a
failing service falling back to a direct fetch, the login token (refreshed before it expires),
and no SearchWeb at all without a search service."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

from tests.fake_services import FakePlatform
from tests.tool_calls import one_step_each, results, run_turn
from tests.wire_client import Sandbox, WireProcess


def services(url: str, **auth: object) -> dict[str, object]:
    return {
        "moonshot_search": {"base_url": f"{url}/search", "custom_headers": {"X-Team": "blue"}, **auth},
        "moonshot_fetch": {"base_url": f"{url}/fetch", **auth},
    }


def test_search_and_fetch_go_through_the_configured_services(sandbox: Sandbox):
    with FakePlatform() as platform:
        platform.issued = 1  # the API key below is the platform's current token
        sandbox.config_extra = {"services": services(platform.url, api_key="access-1")}
        sandbox.scripts = one_step_each(
            ("search", "SearchWeb", {"query": "soulwire release", "limit": 3, "include_content": True}),
            ("fetch", "FetchURL", {"url": "https://example.com/page"}),
            ("fallback", "FetchURL", {"url": f"{platform.url}/broken"}),
            ("bad", "SearchWeb", {"query": "x", "limit": 50}),
        )
        sandbox.write()
        wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
        try:
            messages, result = run_turn(wire, answer=None)
        finally:
            wire.close()
    assert result == {"status": "finished"}
    values = results(messages)

    search = values["search"]
    assert not search["is_error"], search
    assert search["output"] == (
        "Title: Result 0 for soulwire release\nDate: 2026-01-01\nURL: https://example.com/0\n"
        "Summary: snippet 0\n\nPAGE TEXT\n\n---\n\n"
        "Title: Result 1 for soulwire release\nDate: 2026-01-02\nURL: https://example.com/1\n"
        "Summary: snippet 1\n\nPAGE TEXT\n\n"
    )
    (seen,) = [r for r in platform.requests if r.path == "/search"]
    assert seen.body == {
        "text_query": "soulwire release",
        "limit": 3,
        "enable_page_crawling": True,
        "timeout_seconds": 30,
    }
    assert seen.headers["authorization"] == "Bearer access-1"
    assert seen.headers["x-msh-tool-call-id"] == "search"
    assert seen.headers["x-team"] == "blue"

    fetch = values["fetch"]
    assert not fetch["is_error"]
    assert fetch["output"] == "# Served by the fetch service\n\nhttps://example.com/page\n"
    assert fetch["message"] == "The returned content is the main content extracted from the page."
    first_fetch = next(r for r in platform.requests if r.path == "/fetch")
    assert first_fetch.body == {"url": "https://example.com/page"}
    assert first_fetch.headers["accept"] == "text/markdown"

    # The service failed (502): the page was then fetched directly (and the fake refused it).
    assert platform.paths()[-2:] == ["/fetch", "/broken"]
    assert values["fallback"]["is_error"] and "Status: 401" in values["fallback"]["message"]

    assert values["bad"]["is_error"] and "limit" in values["bad"]["message"]


def test_without_a_search_service_searchweb_is_not_offered(sandbox: Sandbox):
    sandbox.scripts = one_step_each(("search", "SearchWeb", {"query": "anything"}))
    sandbox.write()
    wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
    try:
        messages, result = run_turn(wire, answer=None)
    finally:
        wire.close()
    assert result == {"status": "finished"}
    search = results(messages)["search"]
    assert search["is_error"] and "SearchWeb" in search["message"] and "not found" in search["message"]


def test_a_login_token_is_refreshed_before_it_expires_and_used(sandbox: Sandbox):
    with FakePlatform() as platform:
        platform.issued = 1
        credentials = sandbox.share / "credentials" / "kimi-code.json"
        credentials.parent.mkdir(parents=True)
        old = {
            "access_token": "access-1",
            "refresh_token": "refresh-1",
            "expires_at": time.time() + 60,  # inside the refresh margin
            "expires_in": 3600,
            "scope": "kimi-code",
            "token_type": "Bearer",
        }
        credentials.write_text(json.dumps(old))
        oauth = {"oauth": {"storage": "file", "key": "oauth/kimi-code"}}
        sandbox.config_extra = {"services": services(platform.url, **oauth)}
        sandbox.scripts = one_step_each(("search", "SearchWeb", {"query": "q"}))
        sandbox.write()
        env = {**sandbox.env(), "SOULWIRE_OAUTH_HOST": platform.url}
        wire = WireProcess(sandbox.argv(), env, sandbox.work)
        try:
            messages, result = run_turn(wire, answer=None)
        finally:
            wire.close()
    assert result == {"status": "finished"}
    assert not results(messages)["search"]["is_error"]
    refresh = next(r for r in platform.requests if r.path == "/api/oauth/token")
    assert refresh.body["grant_type"] == "refresh_token" and refresh.body["refresh_token"] == "refresh-1"
    search = next(r for r in platform.requests if r.path == "/search")
    assert search.headers["authorization"] == "Bearer access-2"
    stored = json.loads(credentials.read_text())
    assert stored["access_token"] == "access-2" and stored["expires_at"] > time.time() + 3000
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600


def _waiting_for_a_lock(pid: int) -> bool:
    """Whether process `pid` is blocked waiting for a file lock (Linux's /proc/locks)."""
    with Path("/proc/locks").open() as locks:
        return any(line.split()[1:2] == ["->"] and f" {pid} " in line for line in locks)


def test_two_processes_refreshing_at_once_keep_a_working_token(sandbox: Sandbox):
    """Refresh tokens are used once (the fake rotates them): while one process refreshes, a
    second one waits for it and uses what it stored, instead of spending the same refresh
    token again and losing the login."""
    import subprocess
    import sys
    import threading

    from tests.wire_client import DEFAULT_TIMEOUT

    credentials = sandbox.share / "credentials" / "kimi-code.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(
        json.dumps({"access_token": "access-1", "refresh_token": "refresh-1", "expires_at": time.time() + 60})
    )
    script = (
        "import sys; from pathlib import Path; from soulwire.config.credentials import access_token; "
        "print(access_token({'storage': 'file', 'key': 'oauth/kimi-code'}, Path(sys.argv[1])))"
    )
    with FakePlatform() as platform:
        platform.issued = 1
        platform.hold_refreshes = threading.Event()
        env = {**sandbox.env(), "SOULWIRE_OAUTH_HOST": platform.url}

        def start() -> subprocess.Popen[str]:
            argv = [sys.executable, "-c", script, str(sandbox.share)]
            return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)

        def refreshes() -> int:
            return sum(r.path == "/api/oauth/token" for r in platform.requests)

        first = start()
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while refreshes() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refreshes() == 1  # the first one is refreshing (held by the fake)
        second = start()
        while not _waiting_for_a_lock(second.pid) and refreshes() < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refreshes() == 1, "the second process refreshed with the same refresh token"
        platform.hold_refreshes.set()
        outputs = [p.communicate(timeout=DEFAULT_TIMEOUT)[0].strip() for p in (first, second)]
    assert outputs == ["access-2", "access-2"]
    assert refreshes() == 1
    assert json.loads(credentials.read_text())["refresh_token"] == "refresh-2"
