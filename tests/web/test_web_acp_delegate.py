"""A Soulwire turn in the web UI delegates to the reference `kimi acp` (its own scripted model):
kimi's write asks for approval in the page's dialog, the person approves it there, and only
then is the file written; kimi's steps show nested under the Agent call."""

from __future__ import annotations

from typing import Any

import pytest

from tests.acp.kimi import kimi_agent, needs_kimi
from tests.tool_calls import call
from tests.web.browser import TIMEOUT_MS, open_page
from tests.wire_client import Sandbox

pytestmark = [pytest.mark.browser, needs_kimi]
TURN_MS = 90_000  # kimi-cli loads its runtime at its first prompt: seconds on a busy machine


def test_a_kimi_acp_sub_agent_writes_after_the_approval_answered_in_the_page(
    chromium: Any, serve: Any, sandbox: Sandbox
) -> None:
    kimi = kimi_agent(
        sandbox.root,
        call("w1", "WriteFile", {"path": "from-kimi.txt", "content": "written by kimi\n"}),
        "text: kimi wrote from-kimi.txt",
    )
    sandbox.config_extra = {"acp_agents": {"kimi": kimi}}
    server = serve(
        call("a1", "Agent", {"description": "delegate", "prompt": "write it", "subagent_type": "kimi"}),
        "text: parent done",
    )
    session_id = server.create_session()
    web = open_page(chromium, server)
    web.open_session(session_id)
    web.send("ask kimi to write it")
    dialog = web.page.locator("dialog.request-dialog[open]")
    dialog.wait_for(timeout=TURN_MS)
    text = dialog.inner_text()
    assert "kimi (sub-agent kimi) wants to edit files (ACP)" in text, text
    assert "from-kimi.txt" in text and "written by kimi" in text, text  # the diff, before the answer
    target = sandbox.work / "from-kimi.txt"
    assert not target.exists()
    web.page.keyboard.press("y")
    web.page.locator(".transcript").get_by_text("parent done").first.wait_for(timeout=TURN_MS)
    web.wait_idle()
    assert target.read_text() == "written by kimi\n"
    nested = web.page.locator(".subagent")
    assert "kimi wrote from-kimi.txt" in nested.first.inner_text(timeout=TIMEOUT_MS)
    assert nested.locator(".tool").count() == 1  # kimi's own write, nested under the Agent call
    assert web.errors == []
