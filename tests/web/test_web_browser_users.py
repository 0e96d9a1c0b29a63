"""The web UI of a server with named users, in headless Chromium against a real `soulwire serve`:
a member's approval shows who answered, and an admin's audit view lists who did what. Marked
`browser`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.server.serve_client import ServeProcess
from tests.server.test_serve_users import add, as_user
from tests.tool_calls import call
from tests.web.browser import TIMEOUT_MS, WebPage, open_page
from tests.wire_client import Sandbox

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ["SOULWIRE_WEB_SHOTS"]) if os.environ.get("SOULWIRE_WEB_SHOTS") else None


def login(chromium: Any, server: ServeProcess, token: str) -> WebPage:
    web = open_page(chromium, server, login=False)
    web.page.goto(f"{server.base}/web/login?token={token}")
    web.page.wait_for_selector("body[data-ready='1']", timeout=TIMEOUT_MS)
    return web


def shot(web: WebPage, tmp_path: Path, name: str) -> None:
    web.shot(tmp_path / name)
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        web.shot(SHOTS / name)


def test_who_approved_and_the_audit_view(chromium: Any, serve: Any, sandbox: Sandbox, tmp_path: Path) -> None:
    alice = add(sandbox, "alice", "admin")
    bob = add(sandbox, "bob", "member")
    carol = add(sandbox, "carol", "member")
    server = serve("text: checking\n" + call("tc-1", "Shell", {"command": "echo audited"}), "text: done")
    session = as_user(server, bob, "POST", "/api/sessions", json={"title": "bob's work"}).json()["id"]

    member = login(chromium, server, bob)
    assert member.page.locator("#whoami").inner_text() == "bob · member"
    assert member.page.locator("#nav-audit").is_hidden()  # the audit is for admins
    member.open_session(session)
    member.send("run the audited check")
    member.approval()
    member.page.keyboard.press("y")
    member.wait_text("Approved by bob")
    member.wait_idle()
    shot(member, tmp_path, "users-approved-by.png")
    assert as_user(server, carol, "GET", "/api/sessions").json() == []
    member.page.get_by_role("button", name="Share", exact=True).click()
    member.page.fill("#share-user", "carol")
    member.page.get_by_role("button", name="Share with user").click()
    member.page.get_by_text("Shared with carol").wait_for(timeout=TIMEOUT_MS)
    assert [s["id"] for s in as_user(server, carol, "GET", "/api/sessions").json()] == [session]

    admin = login(chromium, server, alice)
    admin.page.locator("#nav-audit").click()
    rows = admin.page.locator("#audit-table tbody tr")
    rows.nth(2).wait_for(timeout=TIMEOUT_MS)
    table = admin.page.locator("#audit-table").inner_text()
    assert "bob\tprompt" in table and "run the audited check" in table
    assert "bob\tapproval" in table and "approve (ApprovalRequest)" in table
    assert "bob\tshare" in table and "with carol" in table
    admin.page.fill("input[aria-label='Filter by user']", "nobody")
    admin.page.press("input[aria-label='Filter by user']", "Enter")
    admin.page.get_by_text("Nothing recorded yet.").wait_for(timeout=TIMEOUT_MS)
    admin.page.fill("input[aria-label='Filter by user']", "")
    admin.page.press("input[aria-label='Filter by user']", "Enter")
    rows.nth(1).wait_for(timeout=TIMEOUT_MS)
    shot(admin, tmp_path, "users-audit.png")
    assert member.errors == [] and admin.errors == [] and member.dialogs == admin.dialogs == []
