"""The overlay's choice in the web UI, in headless Chromium against a real `soulwire serve`
(real bubblewrap): a session made with the New session form (the workspace-write sandbox,
then `overlay: ask`) runs a turn whose card lists the files it wrote while the work dir stays
untouched, and a click on a file shows its diff; Discard throws them away, Commit applies them
(and the turn's row then lists them); the history drawn again shows both choices settled.
Marked `browser`."""

from __future__ import annotations

import pytest

from tests.file_tree import tree
from tests.tool_calls import call
from tests.web.browser import TIMEOUT_MS, open_page

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("bwrap")]

WRITES = "\n".join(
    [
        call("w", "WriteFile", {"path": "notes.txt", "content": "from the file tool\n"}),
        call("s", "Shell", {"command": "echo new > new.txt && rm keep.txt"}),
    ]
)
TURN = (WRITES, "text: wrote them")
FILES = ["A new.txt", "A notes.txt", "D keep.txt"]


def test_overlay_pending_files_discarded_then_committed_from_the_page(chromium, serve):
    server = serve(*TURN, *TURN, args=("--checkpoints",))
    work = server.sandbox.work
    (work / "keep.txt").write_text("kept\n")
    before = tree(work)
    web = open_page(chromium, server)
    page = web.page
    page.goto(f"{server.base}/web/#/new")  # the New session form: sandbox, then its overlay
    page.fill("#new-work-dir", str(work))
    assert page.is_disabled("#new-overlay")  # only with the workspace-write sandbox
    page.select_option("#new-sandbox", "workspace-write")
    page.select_option("#new-overlay", "ask")
    page.check("#new-yolo")
    page.click("form.card button[type=submit]")
    web.wait_session()
    session_id = page.evaluate("() => window.__soulwire.view.id")
    info = server.api("GET", f"/api/sessions/{session_id}").json()
    assert info["sandbox"] == {"mode": "workspace-write", "network": False}

    web.send("write them")
    card = page.locator(".overlay-pending").nth(0)
    card.wait_for(timeout=TIMEOUT_MS)
    web.wait_idle()
    assert sorted(card.locator(".overlay-files li").all_inner_texts()) == sorted(FILES)
    assert tree(work) == before  # the turn's writes wait in the overlay

    for name, line in (("A notes.txt", "+from the file tool"), ("D keep.txt", "-kept")):
        card.locator(".overlay-file").get_by_text(name).click()  # the diff, as a turn's files show it
        diff = page.locator("dialog.checkpoint-dialog[open] .unified")
        diff.wait_for(timeout=TIMEOUT_MS)
        assert line in diff.inner_text().splitlines()
        page.locator("dialog.checkpoint-dialog[open]").get_by_text("Close").click()
    assert tree(work) == before  # looking changes nothing

    web.answers.append(True)  # "Discard …? They cannot be brought back."
    card.locator(".overlay-discard").click()
    page.locator(".overlay-applied").get_by_text("Discarded 3 files").wait_for(timeout=TIMEOUT_MS)
    assert card.locator(".overlay-outcome").inner_text().startswith("Discarded")
    assert tree(work) == before

    web.send("write them again")
    again = page.locator(".overlay-pending").nth(1)
    again.wait_for(timeout=TIMEOUT_MS)
    web.wait_idle()
    again.locator(".overlay-commit").click()
    page.locator(".overlay-applied").get_by_text("Committed 3 files").wait_for(timeout=TIMEOUT_MS)
    assert (work / "notes.txt").read_text() == "from the file tool\n"
    assert (work / "new.txt").read_text() == "new\n" and not (work / "keep.txt").exists()
    row = page.locator(".turn-checkpoint[data-turn='2']")
    row.locator(".changed-file").get_by_text("D keep.txt").wait_for(timeout=TIMEOUT_MS)

    page.reload()  # the history drawn again: both choices settled, none offered
    web.wait_session()
    page.locator(".overlay-pending").nth(1).wait_for(timeout=TIMEOUT_MS)
    states = page.eval_on_selector_all(".overlay-pending", "cards => cards.map(c => c.dataset.state)")
    assert states == ["discarded", "committed"]
    assert page.locator(".overlay-commit").count() == 0
    assert web.errors == [] and web.dialogs == [] and web.answers == []
