"""The web UI on the deployment as shipped (docs/deploy.md): a throwaway PostgreSQL, three
`serve --store` replicas and HAProxy running exactly what `serve haproxy-config` generates, with
named users, in headless Chromium. A member drives a session from a page reached through
HAProxy (a turn with an approval); an observer user watches it from a page on a third replica
(the request appearing and who approved it, live); the owning replica is SIGKILLed mid-turn,
and the member's page — without a reload — shows the interrupted turn closed and runs the next
turn on the replica that took the session over, the observer's page seeing it all; the
observer cannot drive; an admin's page lists the audit trail. Then: "Take control" of a session
another replica runs, at HAProxy's address with the page's login; and a page re-attaching while
a dead owner's lease still names it keeps asking for control. Marked `cluster`."""

from __future__ import annotations

import os
import signal
from typing import Any

import httpx2
import psycopg
import pytest

from tests.server.serve_client import ServeProcess
from tests.server.test_serve_users import add, until_status
from tests.store.test_cluster import deployment
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.tool_calls import call
from tests.web.browser import TIMEOUT_MS, WebPage, open_page
from tests.web.conftest import chromium
from tests.wire_client import Sandbox

pytestmark = pytest.mark.cluster
__all__ = ["chromium", "deployment"]  # (fixtures, by their names)


class _Front:
    """HAProxy's address, in the shape the page helpers take (`base`)."""

    def __init__(self, base: str) -> None:
        self.base = base


def _login(chromium: Any, server: Any, token: str) -> WebPage:
    web = open_page(chromium, server, login=False)
    web.page.goto(f"{server.base}/web/login?token={token}")
    web.page.wait_for_selector("body[data-ready='1']", timeout=TIMEOUT_MS)
    return web


def _owner(url: str, session: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT owner FROM sw_owners WHERE session_id = %s", (session,)).fetchone()
    return str(row[0]) if row else None


def _tools(web: WebPage, state: str) -> int:
    return web.page.locator(f".tool.{state}").count()


def test_the_web_ui_through_haproxy_across_the_sigkill_of_the_owner(
    chromium: Any, deployment: tuple[str, list[ServeProcess], str], sandbox: Sandbox
):
    base, replicas, url = deployment
    store = url.replace(f":{PG_ENV['PGPASSWORD']}@", "@")
    alice = add(sandbox, "alice", "admin", store)
    bob = add(sandbox, "bob", "member", store)
    carol = add(sandbox, "carol", "observer", store)
    for replica in replicas:
        until_status(replica, bob, 200)
    sandbox.scripts = [
        "text: step one\n" + call("tc-1", "Shell", {"command": "echo ran-after-approval"}),
        "text: first turn done",
        "text: the long one\n" + call("tc-2", "Shell", {"command": "sleep 120"}),
    ]
    sandbox.write()
    front = _Front(base)

    as_bob = {"Authorization": f"Bearer {bob}"}
    created = httpx2.post(
        base + "/api/sessions",
        json={"title": "failover"},
        headers={"Authorization": f"Bearer {bob}"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    session = created.json()["id"]
    shared = httpx2.post(
        f"{base}/api/sessions/{session}/share", json={"user": "carol"}, headers=as_bob, timeout=30
    )
    assert shared.status_code == 200, shared.text
    member = _login(chromium, front, bob)
    assert member.page.locator("#whoami").inner_text() == "bob · member"
    member.open_session(session)
    member.page.wait_for_selector(".role-badge.controller")
    owner_base = _owner(url, session)
    assert owner_base is not None
    owner = next(r for r in replicas if r.base == owner_base)
    third = next(r for r in replicas if r is not owner)

    watcher = _login(chromium, third, carol)  # straight to a replica that does not run it
    watcher.open_session(session)
    watcher.page.wait_for_selector(".role-badge.observer")
    assert watcher.page.locator("#composer-input").is_disabled()  # an observer user only watches

    member.send("run the check")
    member.approval()
    watcher.wait_text("awaiting approval")  # the request, live on the third replica
    member.page.keyboard.press("y")
    member.wait_text("Approved by bob")
    watcher.wait_text("Approved by bob")
    watcher.wait_text("first turn done")
    member.wait_idle()

    member.send("now the long one")
    member.approval()
    member.page.keyboard.press("y")
    watcher.page.locator(".resolved-by").nth(1).wait_for(timeout=TIMEOUT_MS)
    member.page.wait_for_selector(".tool.running")  # the command runs on the owner
    sandbox.scripts = ["text: after the failover"]
    sandbox.write()  # (the replica taking over reads its script when it opens the session)
    os.killpg(owner.proc.pid, signal.SIGKILL)

    # Without a reload: the page re-attaches through HAProxy (to the replica that takes the
    # session over) from its last seq, and draws the interrupted turn's end.
    member.page.wait_for_selector(".tool.cancelled", timeout=60_000)
    member.page.wait_for_selector(".role-badge.controller")
    watcher.page.wait_for_selector(".tool.cancelled", timeout=60_000)
    assert wait_for(lambda: _owner(url, session) not in (None, owner.base), timeout=60)
    member.wait_idle()
    member.send("and now?")
    member.wait_text("after the failover")
    watcher.wait_text("after the failover")
    member.wait_idle()
    assert _tools(member, "cancelled") == 1 and _tools(member, "ok") == 1
    assert member.count("step one") == 1 and watcher.count("step one") == 1  # nothing drawn twice

    admin = _login(chromium, front, alice)
    admin.page.locator("#nav-audit").click()
    admin.page.locator("#audit-table tbody tr").nth(4).wait_for(timeout=TIMEOUT_MS)
    table = admin.page.locator("#audit-table").inner_text()
    for line in ("bob\tprompt", "run the check", "now the long one", "and now?", "bob\tapproval"):
        assert line in table, table
    assert "bob\tshare" in table and "with carol" in table
    assert "\tcarol\t" not in table  # the observer did nothing
    for web in (member, watcher, admin):
        assert web.errors == [] and web.dialogs == [], (web.errors, web.dialogs)


def test_take_control_through_haproxy_reaches_the_owner_without_a_second_login(
    chromium: Any, deployment: tuple[str, list[ServeProcess], str], sandbox: Sandbox
):
    """A session run by a replica other than the one HAProxy's hash sends its pages to: the
    page watches it there, and "Take control" drives it on its owner — at HAProxy's address,
    with the login the page has."""
    base, replicas, url = deployment
    store = url.replace(f":{PG_ENV['PGPASSWORD']}@", "@")
    bob = add(sandbox, "bob", "member", store)
    for replica in replicas:
        until_status(replica, bob, 200)
    sandbox.scripts = ["text: driven through haproxy"]
    sandbox.write()
    as_bob = {"Authorization": f"Bearer {bob}"}
    for owner in [r for r in replicas for _ in range(3)]:  # (a bounded search)
        session = httpx2.post(base + "/api/sessions", json={}, headers=as_bob, timeout=30).json()["id"]
        keeper = owner.ws(session, token=bob, mode="observer")  # the owner opens it, and watches
        keeper.until(lambda m: m.get("method") == "attached")
        hashed = httpx2.get(f"{base}/api/sessions/{session}", headers=as_bob, timeout=30).json()
        if not hashed["live"]:  # HAProxy sends this session's requests to another replica
            break
    else:
        pytest.fail("HAProxy hashed every session to the replica that runs it")
    assert hashed["replica"] == owner.base

    web = _login(chromium, _Front(base), bob)
    web.open_session(session)
    web.page.wait_for_selector(".role-badge.observer")
    web.wait_text(f"Run by the replica at {owner.base}", ".owner-note")
    web.page.click("text=Take control")
    web.page.wait_for_selector(".role-badge.controller")
    assert web.page.url == f"{base}/web/#/s/{session}"  # still at HAProxy's address
    web.send("from the page")
    web.wait_text("driven through haproxy")
    assert _owner(url, session) == owner.base  # the turn ran on the owner
    # (the page's first WebSocket, as controller, was answered with the 307 that names the owner)
    errors = [e for e in web.errors if "Unexpected response code: 307" not in e]
    assert errors == [] and web.dialogs == [], (web.errors, web.dialogs)


def test_a_page_re_attaches_as_controller_while_a_dead_owner_s_lease_still_names_it(
    chromium: Any, deployment: tuple[str, list[ServeProcess], str], sandbox: Sandbox
):
    """Right after the owner's SIGKILL its lease still names it for a while: the page that
    drove the session is refused (a 307 to the dead owner) when it re-attaches. It keeps asking
    for control — not settling to watch a session nobody runs — and once the session is free,
    the replica it reaches takes it over and the page draws the interrupted turn's end live."""
    base, replicas, url = deployment
    sandbox.scripts = ["text: the long one\n" + call("tc-1", "Shell", {"command": "sleep 120"})]
    sandbox.write()
    token = replicas[0].token
    created = httpx2.post(
        base + "/api/sessions", json={"yolo": True}, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    session = created.json()["id"]
    web = _login(chromium, _Front(base), token)  # (the replicas' single token)
    web.open_session(session)
    web.page.wait_for_selector(".role-badge.controller")
    web.send("run the long one")
    web.page.wait_for_selector(".tool.running")
    owner = next(r for r in replicas if r.base == _owner(url, session))
    sandbox.scripts = ["text: after the failover"]
    sandbox.write()

    web.page.context.set_offline(True)  # the page re-attaches once the test has the dead owner's place
    os.killpg(owner.proc.pid, signal.SIGKILL)
    with psycopg.connect(url, autocommit=True) as held:
        lock = "SELECT pg_try_advisory_lock(hashtextextended('soulwire-session:' || %s, 0))"
        assert wait_for(lambda: held.execute(lock, (session,)).fetchone() == (True,), timeout=30)
        held.execute(  # the dead owner's lease, as it stands for a while after its death
            "UPDATE sw_owners SET expires_at = now() + interval '1 minute' WHERE session_id = %s", (session,)
        )
        refused = web.page.expect_console_message(lambda m: "Unexpected response code: 307" in m.text)
        with refused:  # a 307 to the dead owner
            web.page.context.set_offline(False)
        # It asks for control again (it does not settle to watch through the replica it reached).
        web.page.wait_for_event("console", lambda m: "Unexpected response code: 307" in m.text)
        held.execute("UPDATE sw_owners SET expires_at = now() WHERE session_id = %s", (session,))
    # (the lock went with the connection: the session is free)
    web.page.wait_for_selector(".tool.cancelled", timeout=60_000)
    web.page.wait_for_selector(".role-badge.controller")
    web.wait_idle()
    web.send("and now?")
    web.wait_text("after the failover")
    assert _owner(url, session) not in (None, owner.base)
