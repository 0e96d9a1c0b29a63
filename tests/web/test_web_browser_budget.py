"""Each budget limit at each scope in the web UI, in headless Chromium against a real
`soulwire serve` (tests/budget_cases.py): set with `/budget` in a new session, the limit stops
the prompt after its first command, the transcript names the limit and the session header shows
it, `/budget` raises it and "continue" goes on. Marked `browser`."""

from __future__ import annotations

import pytest

from tests.budget_cases import (
    KINDS,
    LIMIT,
    PRICES,
    RAISED,
    SCOPES,
    TREE_TOKENS,
    budget_prompt,
    limit_text,
    scripts,
    subagent_tree_scripts,
)
from tests.web.browser import open_page

pytestmark = pytest.mark.browser


RAISED_SHOWN = {"usd": "$10.0000", "tokens": "100,000", "time_s": "3600s", "tool_calls": "100"}
"""How `/budget` shows the raised limits."""


def header_label(scope: str, kind: str) -> str:
    """How the session header names a limit (`tree tool calls 1 of 1`)."""
    return f"{scope} {kind.removesuffix('_s').replace('_', ' ')} "


@pytest.mark.parametrize("kind", KINDS)
def test_each_limit_at_each_scope_stops_the_prompt_and_raising_it_continues(chromium, serve, sandbox, kind):
    sandbox.config_extra = {"prices": PRICES}
    server = serve(*scripts(kind))
    web = open_page(chromium, server)
    for scope in SCOPES:
        web.page.click("#new-session")
        web.page.check("#new-yolo")
        web.page.click("form button[type=submit]")
        web.wait_session()
        web.send(budget_prompt(scope, kind, LIMIT[kind]))
        web.wait_text(f"{scope} {kind}: ")
        web.wait_idle()
        web.send("go")
        web.wait_text("Budget: " + limit_text(scope, kind))
        web.wait_idle()
        web.wait_text(header_label(scope, kind), selector=".statusline")
        assert web.count("continued") == 0
        web.send(budget_prompt(scope, kind, RAISED[kind]))
        web.wait_text(f"of {RAISED_SHOWN[kind]} (")
        web.wait_idle()
        web.send("continue")
        web.wait_text("continued")
        web.wait_idle()
    assert web.errors == [] and web.dialogs == []


def test_a_subagent_tree_that_reaches_the_trees_limit_is_stopped(chromium, serve, sandbox):
    """Two sub-agents that together reach the tree's token limit: the transcript names the
    limit, the header shows the tree's spend (theirs and the parent's)."""
    sandbox.config_extra = {"budgets": {"tree": {"tokens": TREE_TOKENS}}}
    server = serve(*subagent_tree_scripts())
    web = open_page(chromium, server)
    web.page.click("#new-session")
    web.page.check("#new-yolo")
    web.page.click("form button[type=submit]")
    web.wait_session()
    web.send("go")
    web.wait_text("Budget: " + limit_text("tree", "tokens"))
    web.wait_idle()
    web.wait_text("tree tokens 2100 of 2000", selector=".statusline")
    assert web.errors == [] and web.dialogs == []
