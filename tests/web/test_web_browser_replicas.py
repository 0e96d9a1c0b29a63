"""The web UI on `serve` replicas sharing a PostgreSQL store, in headless Chromium: a page
served by replica B opens a session that replica A runs. A browser's WebSocket does not follow
the 307 (nor may the page connect to another origin), so the page watches the session through
B, naming A; taking control follows the answer's `data.owner` to A's page, where it drives the
session. Marked `browser`."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import psycopg
import pytest

from tests.postgres_cluster import PASSWORD, Cluster
from tests.server.serve_client import ServeProcess
from tests.store.conftest import pg_cluster
from tests.store.test_cluster import deployment
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.web.browser import open_page
from tests.wire_client import Sandbox

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("postgres")]
__all__ = ["deployment", "pg_cluster"]  # (fixtures of tests/store: the cluster, the replicas behind HAProxy)


@pytest.fixture
def replicas(sandbox: Sandbox, pg_cluster: Cluster) -> Iterator[tuple[ServeProcess, ServeProcess, str]]:
    """(A, B, the store URL with its password)."""
    url = pg_cluster.create_database(f"webreplicas{uuid.uuid4().hex[:12]}")
    bare = url.replace(f":{PASSWORD}@", "@")
    sandbox.scripts = ["text: answered on A", "text: driven from the page"]
    started = [ServeProcess(sandbox, "--store", bare, env=PG_ENV) for _ in range(2)]
    try:
        yield started[0], started[1], url
    finally:
        for server in started:
            server.close()


def test_a_page_on_another_replica_watches_the_session_and_takes_control_on_its_owner(chromium, replicas):
    a, b, url = replicas
    session = a.create_session()
    keeper = a.ws(session)  # A opens the session (and so runs it), then only watches
    keeper.initialize()
    keeper.call("attach", {"mode": "observer"})

    web = open_page(chromium, b)
    web.open_session(session)
    web.page.wait_for_selector(".role-badge.observer")
    web.wait_text(f"Run by the replica at {a.base}", ".owner-note")
    driver = a.ws(session)
    driver.initialize()
    driver.request("prompt", {"user_input": "from a client of A"})
    web.wait_text("answered on A")  # live, through B
    driver.until(lambda m: m.get("method") == "event" and m["params"]["type"] == "TurnEnd")
    driver.close()  # (A's controller role is free again)

    web.page.click("text=Take control")  # B says where: the page goes to A's
    web.page.wait_for_url(f"{a.base}/web/#/s/{session}")
    web.wait_session()
    web.page.wait_for_selector(".role-badge.controller")
    web.send("from the page")
    web.wait_text("driven from the page")
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    assert row == (a.base,)  # every turn ran on A
    assert not web.dialogs, web.dialogs


@dataclass
class _Front:
    """HAProxy in front of the replicas, as `open_page` sees a server."""

    base: str
    token: str


def test_a_page_through_haproxy_answers_the_approval_asked_again_after_its_replica_dies(
    chromium, deployment: tuple[str, list[ServeProcess], str], sandbox: Sandbox
):
    """The web UI through HAProxy: a turn waits for an approval (the dialog is open) when the
    owning replica is SIGKILLed; the page reconnects through HAProxy to another replica, which
    takes the session over and asks the approval again; approving it in the page runs the call
    there and the turn ends normally, every recorded message once; the next prompt works."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    base, replicas, url = deployment
    token = replicas[0].token
    created = httpx2.post(
        base + "/api/sessions", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    web = open_page(chromium, _Front(base, token))  # type: ignore[arg-type]
    web.open_session(session)
    web.send("run it")
    web.approval().get_by_text("echo ok").first.wait_for()
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    assert row is not None
    (owner,) = [r for r in replicas if r.base == row[0]]
    sandbox.scripts = ["text: the rest of the turn", "text: after the failover"]
    sandbox.write()  # (the replica taking over reads its script when it opens the session)
    os.killpg(owner.proc.pid, signal.SIGKILL)

    def taken_over() -> bool:
        with psycopg.connect(url) as conn:
            found = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
        return found is not None and found[0] != owner.base

    assert wait_for(taken_over, timeout=60)
    rest = web.page.locator(".transcript").get_by_text("the rest of the turn").first
    approve = web.page.locator("dialog.request-dialog[open]").get_by_role("button", name="Approve Y")
    deadline = time.monotonic() + 60
    while not rest.is_visible():
        assert time.monotonic() < deadline, "the turn did not go on"
        try:  # (an answer given before the page was back is lost with the old connection: the
            approve.click(timeout=1_000)  # new owner asks again, in a new dialog)
        except PlaywrightTimeout:
            continue
    web.wait_idle()
    web.send("and now?")
    web.wait_text("after the failover")
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, kind, message FROM sw_wire WHERE session_id = %s ORDER BY seq", (session,)
        ).fetchall()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    kinds = [r[1] for r in rows]
    assert kinds.count("TurnBegin") == 2 and kinds.count("TurnEnd") == 2 and kinds.count("ToolResult") == 1
    result = json.loads(next(r[2] for r in rows if r[1] == "ToolResult"))["payload"]["return_value"]
    assert result["is_error"] is False and "ok" in json.dumps(result)
    assert all("WebSocket" in e for e in web.errors), web.errors  # (the dead replica's socket)
    assert not web.dialogs, web.dialogs
