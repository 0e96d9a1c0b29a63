"""Checkpoints in the web UI, in headless Chromium against a real `soulwire serve` with the
scripted model: each turn lists the files it changed (a click shows the diff), "Rewind to
here" names a file edited by hand and rewinds when forced, "Fork from here" makes a session
with its own work dir. Marked `browser`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tool_calls import call
from tests.web.browser import TIMEOUT_MS, WebPage, open_page

pytestmark = pytest.mark.browser

TURNS = (
    call("w", "WriteFile", {"path": "a.txt", "content": "by the agent\n"}),
    "text: one",
    call("s", "Shell", {"command": "rm keep.txt"}),
    "text: two",
)


def two_turns(chromium: Any, serve: Any, **page: Any) -> tuple[Any, WebPage, str]:
    """A session whose turn 1 writes a.txt and turn 2 removes keep.txt, driven from the page
    until each turn's row lists its file."""
    server = serve(*TURNS)
    (server.sandbox.work / "keep.txt").write_text("kept\n")
    session_id = server.create_session(checkpoints=True, yolo=True)
    web = open_page(chromium, server, **page)
    web.open_session(session_id)
    for prompt, answer in (("write it", "one"), ("remove it", "two")):
        web.send(prompt)
        web.wait_text(answer)
        web.wait_idle()
    for turn, label in ((1, "A a.txt"), (2, "D keep.txt")):
        row = web.page.locator(f".turn-checkpoint[data-turn='{turn}']")
        row.locator(".changed-file").get_by_text(label).wait_for(timeout=TIMEOUT_MS)
    return server, web, session_id


def test_turn_files_diff_rewind_with_a_conflict_and_fork_with_a_work_dir(chromium, serve, tmp_path):
    server, web, session_id = two_turns(chromium, serve)
    work, page = server.sandbox.work, web.page
    first, second = (
        page.locator(".turn-checkpoint[data-turn='1']"),
        page.locator(".turn-checkpoint[data-turn='2']"),
    )

    first.locator(".changed-file").click()
    diff = page.locator("dialog.checkpoint-dialog[open] .unified")
    diff.wait_for(timeout=TIMEOUT_MS)
    assert "+by the agent" in diff.inner_text()
    page.locator("dialog.checkpoint-dialog[open]").get_by_text("Close").click()

    (work / "keep.txt").write_text("mine\n")  # by hand: the rewind would overwrite it
    second.locator(".rewind-here").click()
    page.click("dialog.checkpoint-dialog[open] .rewind-go")
    page.locator(".rewind-problem .conflicts").get_by_text("keep.txt").wait_for(timeout=TIMEOUT_MS)
    assert (work / "keep.txt").read_text() == "mine\n"  # refused: nothing touched
    page.click("dialog.checkpoint-dialog[open] .rewind-force")
    page.locator(".rewind-note").wait_for(timeout=TIMEOUT_MS)
    assert (work / "keep.txt").read_text() == "kept\n" and (work / "a.txt").exists()
    assert page.locator(".transcript .user").all_inner_texts() == ["write it"]  # turn 2 is gone
    first.locator(".changed-file").get_by_text("A a.txt").wait_for(timeout=TIMEOUT_MS)

    fork_dir = tmp_path / "fork"
    first.locator(".fork-here").click()
    page.fill("#fork-work-dir", str(fork_dir))
    page.click("dialog.checkpoint-dialog[open] .fork-go")
    page.wait_for_function("id => !location.hash.includes(id)", arg=session_id)
    web.wait_session()
    forked = page.evaluate("() => window.__soulwire.view.id")
    info = server.api("GET", f"/api/sessions/{forked}").json()
    assert info["work_dir"] == str(fork_dir) and info["turns"] == 1
    assert (fork_dir / "a.txt").read_text() == "by the agent\n" and (
        fork_dir / "keep.txt"
    ).read_text() == "kept\n"
    assert page.locator(".transcript .user").all_inner_texts() == ["write it"]
    assert web.errors == [] and web.dialogs == []


SLOW_FRAMES = "window.requestAnimationFrame = cb => setTimeout(() => cb(performance.now()), 400);"
"""Animation frames late by far more than a round trip to the server (a busy machine; a tab in
the background gets none until it is shown again)."""


def test_each_turn_gets_its_row_when_the_page_draws_late(chromium, serve):
    """The row of a turn is drawn once the turn is on the page, however late the page draws
    the events it has received (the `end` checkpoint's event comes before that)."""
    _, web, _ = two_turns(chromium, serve, init_script=SLOW_FRAMES)
    assert web.page.locator(".turn-checkpoint").count() == 2
    assert web.errors == [] and web.dialogs == []


def test_a_rewind_stops_the_background_tasks_first_and_the_page_says_so(chromium, serve):
    from tests.e2e.test_shell_tool import processes_running, unique_sleep

    duration = unique_sleep()
    background = {"command": f"sleep {duration}", "run_in_background": True, "description": "sleeper"}
    server = serve(
        "\n".join(
            [call("w", "WriteFile", {"path": "a.txt", "content": "x\n"}), call("b", "Shell", background)]
        ),
        "text: started",
    )
    session_id = server.create_session(checkpoints=True, yolo=True)
    web = open_page(chromium, server)
    web.open_session(session_id)
    web.send("start it")
    web.wait_text("started")
    web.wait_idle()
    assert processes_running(duration), "the background command is not running"
    page = web.page
    row = page.locator(".turn-checkpoint[data-turn='1']")
    row.locator(".changed-file").get_by_text("A a.txt").wait_for(timeout=TIMEOUT_MS)
    row.locator(".rewind-here").click()
    page.click("dialog.checkpoint-dialog[open] .rewind-go")
    note = page.locator(".rewind-note")
    note.wait_for(timeout=TIMEOUT_MS)
    assert "1 background task(s) stopped" in note.inner_text()
    assert processes_running(duration) == []  # stopped before the rewind answered
    assert not (server.sandbox.work / "a.txt").exists()
    assert web.errors == [] and web.dialogs == []
