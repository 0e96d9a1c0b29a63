"""The web UI on `serve` replicas sharing a PostgreSQL store, in headless Chromium: a page
served by replica B opens a session that replica A runs. A browser's WebSocket does not follow
the 307 (nor may the page connect to another origin), so the page watches the session through
B, naming A; taking control follows the answer's `data.owner` to A's page, where it drives the
session. Marked `browser`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres_cluster import PASSWORD, Cluster
from tests.server.serve_client import ServeProcess
from tests.store.conftest import pg_cluster
from tests.store.test_serve_replicas import PG_ENV
from tests.web.browser import open_page
from tests.wire_client import Sandbox

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("postgres")]
__all__ = ["pg_cluster"]  # (the PostgreSQL cluster fixture of tests/store)


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
