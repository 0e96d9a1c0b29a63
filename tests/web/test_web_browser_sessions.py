"""The web UI's new-session form (model, yolo, plan mode), archived sessions, titles from the
first prompt, cost in the trace view and the configuration form, in headless Chromium against
a real `soulwire serve` with the scripted model. Marked `browser`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from soulwire.sdk.pricing import price_for
from soulwire.wire.types import TokenUsage
from tests.tool_calls import call
from tests.web.browser import open_page
from tests.wire_client import Sandbox

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ["SOULWIRE_WEB_SHOTS"]) if os.environ.get("SOULWIRE_WEB_SHOTS") else None
HOSTILE = "<img src=x onerror=window.pwned=1>"


def two_models(sandbox: Sandbox) -> None:
    sandbox.config_extra = {
        "models": {
            "scripted": {
                "provider": "scripted_provider",
                "model": "scripted_echo",
                "max_context_size": 100_000,
            },
            "priced": {
                "provider": "scripted_provider",
                "model": "kimi-k2",
                "max_context_size": 123_456,
                "display_name": f"Priced {HOSTILE}",
            },
        }
    }


def shot(web: Any, tmp_path: Path, name: str) -> None:
    web.shot(tmp_path / name)
    if SHOTS is not None:  # keep them for a person to look at
        SHOTS.mkdir(parents=True, exist_ok=True)
        web.shot(SHOTS / name)


MODELS_LOADED = "() => { const m = document.getElementById('new-model'); return m !== null && !m.disabled; }"
"""The new-session form is drawn and its model list loaded (the form is drawn after the click)."""


def test_new_session_with_a_model_yolo_and_plan_mode(chromium, serve, sandbox, tmp_path):
    two_models(sandbox)
    marker = sandbox.root / "ran.txt"
    server = serve(
        "usage: input_other=10 output=5\n" + call("tc1", "Shell", {"command": f"echo ran > {marker}"}),
        "text: all done",
    )
    web = open_page(chromium, server)
    web.page.click("#new-session")
    model = web.page.locator("#new-model")
    web.page.wait_for_function(MODELS_LOADED)
    assert model.input_value() == "scripted"  # the default, preselected
    options = model.locator("option").all_inner_texts()
    assert options == ["scripted — scripted_echo (default)", f"priced — Priced {HOSTILE}"]  # text, not HTML
    model.select_option("priced")
    assert "$0.6/$2.5 per M tokens" in web.page.locator("#new-model-hint").inner_text()
    web.page.check("#new-yolo")
    web.page.check("#new-plan")
    shot(web, tmp_path, "web-new-session.png")
    web.page.click("form button[type=submit]")
    web.wait_session()
    session_id = web.page.evaluate("() => window.__soulwire.view.id")
    info = server.api("GET", f"/api/sessions/{session_id}").json()
    assert (info["model"], info["yolo"], info["plan_mode"]) == ("priced", True, True)
    meta = web.page.locator(".session-sub").inner_text()
    assert "priced" in meta and "YOLO" in meta
    web.send("run it")
    web.wait_text("all done")
    web.wait_idle()
    assert web.page.locator("dialog.request-dialog[open]").count() == 0  # yolo: nothing asked
    assert marker.read_text().strip() == "ran"
    assert "PLAN" in web.page.locator(".statusline").inner_text()
    assert "of 123.5k" in web.page.locator(".statusline").inner_text()  # the chosen model's window
    assert web.page.evaluate("() => window.pwned") is None
    assert web.errors == [] and web.dialogs == []


def test_archive_hide_show_open_and_a_prompt_unarchives(chromium, serve, sandbox):
    server = serve("text: back in use")
    kept = server.create_session(title="kept session")
    old = server.create_session(title="old session")
    web = open_page(chromium, server)
    web.open_session(old)
    web.page.click("button:has-text('Archive')")
    web.page.wait_for_function("() => !document.querySelector('.archived-note').hidden")
    assert server.api("GET", f"/api/sessions/{old}").json()["archived"] is True
    titles = web.page.locator(".session-title")
    web.page.wait_for_function("() => document.querySelectorAll('.session-title').length === 1")
    assert titles.all_inner_texts() == ["kept session"]  # hidden by default
    web.page.check("#show-archived")
    web.page.wait_for_function("() => document.querySelectorAll('.session-title').length === 2")
    assert web.page.locator(".session-link:has-text('old session') .archived-badge").count() == 1
    # Still readable; a prompt brings it back.
    web.open_session(old)
    assert web.page.locator("button:has-text('Unarchive')").count() == 1
    web.send("hello again")
    web.wait_text("back in use")
    web.wait_idle()
    web.page.wait_for_function("() => document.querySelector('.archived-note').hidden")
    assert server.api("GET", f"/api/sessions/{old}").json()["archived"] is False
    web.page.uncheck("#show-archived")
    web.page.wait_for_function("() => document.querySelectorAll('.session-title').length === 2")
    assert server.api("GET", "/api/sessions?archived=true").json() == []
    assert kept and web.errors == []


def test_a_new_session_is_titled_by_its_first_prompt(chromium, serve):
    server = serve("text: first", "text: second")
    web = open_page(chromium, server)
    web.page.click("#new-session")
    web.page.click("form button[type=submit]")
    web.wait_session()
    assert web.page.locator(".session-title-h").inner_text() == "Untitled session"
    prompt = f"Explain  {HOSTILE}\nhandling in the parser please"
    web.send(prompt)
    web.wait_text("first")
    web.wait_idle()
    expected = " ".join(prompt.split())[:50]  # whitespace folded, at most 50 characters
    web.page.wait_for_function(
        "t => document.querySelector('.session-title-h').textContent === t", arg=expected
    )
    web.page.locator(".session-title").get_by_text(expected).wait_for()  # the list too
    web.answers.append("My own title")
    web.page.click("button:has-text('Rename')")
    web.page.wait_for_function(
        "() => document.querySelector('.session-title-h').textContent === 'My own title'"
    )
    web.send("and another thing")
    web.wait_text("second")
    web.wait_idle()
    assert web.page.locator(".session-title-h").inner_text() == "My own title"
    assert web.page.evaluate("() => window.pwned") is None and web.errors == []


def test_trace_shows_cost_per_step_turn_and_session_or_says_it_is_unknown(chromium, serve, sandbox, tmp_path):
    two_models(sandbox)
    server = serve(
        "usage: input_other=120 output=30 input_cache_read=1000\n"
        + call("a1", "Agent", {"description": "look around", "prompt": "List the files"}),
        "usage: input_other=40 output=10\ntext: "
        + "The sub-agent looked around and found hello.txt only. " * 6,
        "usage: input_other=200 output=5\ntext: parent done",
        args=("--yolo",),
    )
    priced = server.create_session(model="priced")
    web = open_page(chromium, server)
    web.open_session(priced)
    web.send("explore please")
    web.wait_text("parent done")
    web.wait_idle()
    web.page.goto(f"{server.base}/web/#/trace/{priced}")
    web.page.wait_for_selector("body[data-trace-ready]")
    price = price_for("kimi-k2")
    assert price is not None

    def usd(**usage: int) -> str:
        return f"${round(price.cost(TokenUsage(**usage)), 6):.6f}"

    steps = web.page.locator(".trace-row.kind-step")
    first = usd(input_other=120, output=30, input_cache_read=1000)  # the SDK's own sum
    assert first == "$0.000297"
    assert first in steps.first.inner_text() and "1150 tok" in steps.first.inner_text()
    sub = usd(input_other=40, output=10)
    agent_row = web.page.locator(".trace-row.kind-agent").first.inner_text()
    assert sub in agent_row
    turn = usd(input_other=120 + 200 + 40, output=30 + 5 + 10, input_cache_read=1000)
    assert turn in web.page.locator(".trace-row.kind-turn").first.inner_text()  # sub-agent included
    assert f"{turn} in all" in web.page.locator(".trace-summary").inner_text()
    shot(web, tmp_path, "web-trace-cost.png")
    # A model without a price: tokens, and "unknown", never an invented number.
    plain = server.create_session()
    web.open_session(plain)
    web.send("same again")  # (each session plays the scripts from the first)
    web.wait_text("parent done")
    web.wait_idle()
    web.page.goto(f"{server.base}/web/#/trace/{plain}")
    web.page.wait_for_function(
        "() => document.querySelector('.trace-summary')?.textContent.includes('cost unknown')"
    )
    summary = web.page.locator(".trace-summary").inner_text()
    assert "cost unknown (no price for scripted_echo)" in summary and "1405 tokens" in summary
    assert "$" not in web.page.locator(".trace-rows").inner_text()
    assert web.errors == []


def test_the_configuration_form(chromium, serve, sandbox, tmp_path):
    sandbox.config_extra = {
        "providers": {
            "scripted_provider": {
                "type": "_scripted_echo",
                "api_key": "sk-top-secret-999",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": str(sandbox.root / "scripts.json")},
            }
        },
        "unknown_key": {"kept": True},
    }
    server = serve()
    web = open_page(chromium, server)
    web.page.click("#nav-config")
    web.page.wait_for_selector("#cfg-default_model")
    page_text = web.page.content() + web.page.evaluate(
        "() => [...document.querySelectorAll('input, textarea')].map(e => e.value).join(' ')"
    )
    assert "sk-top-secret-999" not in page_text  # never sent to the page
    assert web.page.locator("#cfg-default_model").input_value() == "scripted"
    assert "a key is stored" in web.page.locator(".cfg-entry").first.inner_text()
    # A value the engine refuses: the error shows next to its field, nothing is saved.
    before = sandbox.config_path.read_text()
    web.page.fill("#cfg-loop_control_max_steps_per_turn", "0")
    web.page.click("#config-save-form")
    error = web.page.locator("#cfg-loop_control_max_steps_per_turn-error")
    error.get_by_text("greater than or equal to 1").wait_for()
    assert sandbox.config_path.read_text() == before
    web.page.set_viewport_size({"width": 1280, "height": 920})
    web.page.evaluate("() => document.querySelector('.page h1').scrollIntoView()")
    shot(web, tmp_path, "web-config-form.png")
    # Valid values, a new model (its display name is text, never markup), saved.
    web.page.fill("#cfg-loop_control_max_steps_per_turn", "25")
    web.page.check("#cfg-default_yolo")
    web.page.click("#cfg-add-model")
    entry = web.page.locator(".cfg-entry").last
    entry.locator("input[id$='_alias']").fill("second")
    entry.locator("input[id$='_model']").fill("kimi-k2")
    entry.locator("input[id$='_display_name']").fill(HOSTILE)
    web.page.click("#config-save-form")
    web.page.locator(".toast").get_by_text("Configuration saved").wait_for()
    stored = json.loads(sandbox.config_path.read_text())
    assert stored["default_yolo"] is True and stored["loop_control"]["max_steps_per_turn"] == 25
    assert stored["models"]["second"]["display_name"] == HOSTILE
    assert stored["providers"]["scripted_provider"]["api_key"] == "sk-top-secret-999"  # kept
    assert stored["unknown_key"] == {"kept": True}
    web.page.wait_for_selector("[data-model='second']")
    assert web.page.evaluate("() => window.pwned") is None
    # The new model is offered when creating a session.
    web.page.click("#new-session")
    web.page.wait_for_function(MODELS_LOADED)
    assert "second" in web.page.locator("#new-model option").all_inner_texts()[-1]
    assert [e for e in web.errors if "status of 422" not in e] == [] and web.dialogs == []


def test_trace_loads_a_large_payload_on_demand(chromium, serve, sandbox):
    content = "".join(f"line {n}\n" for n in range(12_000)) + "END-OF-BIG\n"  # ~100 KB of arguments
    server = serve(
        call("tc1", "WriteFile", {"path": "big.txt", "content": content}),
        "text: wrote a lot",
        args=("--yolo",),
    )
    session_id = server.create_session()
    ws = server.ws(session_id)
    ws.initialize()
    assert ws.call("prompt", {"user_input": "write a lot"})[1]["result"]["status"] == "finished"
    ws.close()
    web = open_page(chromium, server)
    web.page.goto(f"{server.base}/web/#/trace/{session_id}")
    web.page.wait_for_selector("body[data-trace-ready]")
    tool = web.page.locator(".trace-row.kind-tool").first
    assert "WriteFile" in tool.inner_text()  # its name and id came with the reference
    tool.click()
    assert "END-OF-BIG" not in web.page.locator(".trace-json").inner_text()  # not fetched yet
    load = web.page.locator("button:has-text('Load the whole ToolCall payload')")
    load.click()
    web.page.wait_for_function(
        "() => document.querySelector('.trace-json').textContent.includes('END-OF-BIG')"
    )
    assert load.count() == 0
    with web.page.expect_download() as download:
        web.page.click("text=Export JSON")
    exported = json.loads(Path(download.value.path()).read_text())
    calls = [r for r in exported["records"] if r["message"]["type"] == "ToolCall"]
    assert "END-OF-BIG" in calls[0]["message"]["payload"]["function"]["arguments"]  # the export is whole
    assert "blob" not in calls[0]["message"]
    assert web.errors == []


def test_a_missing_work_dir_is_created_after_asking(chromium, serve, sandbox):
    server = serve()
    web = open_page(chromium, server)
    web.page.click("#new-session")
    target = sandbox.root / "fresh" / "app"
    web.page.fill("#new-work-dir", str(target))
    web.answers.append(True)  # "… does not exist. Create it?"
    web.page.click("form button[type=submit]")
    web.wait_session()
    assert target.is_dir()
    assert web.page.locator(".session-sub code").inner_text() == str(target)
    assert web.errors == [e for e in web.errors if "status of 422" in e] and web.dialogs == []


def test_the_header_shows_the_budget_and_budget_raises_it_to_continue(chromium, serve, sandbox):
    sandbox.config_extra = {"budgets": {"tree": {"tokens": 1000}}}
    usage = '\nusage: {"input_other": 600, "output": 0}'
    server = serve(
        call("g1", "Glob", {"pattern": "*"}) + usage,
        call("g2", "Glob", {"pattern": "*"}) + usage,
        "text: done",
    )
    web = open_page(chromium, server)
    web.page.click("#new-session")
    web.page.click("form button[type=submit]")
    web.wait_session()
    web.send("go")
    web.wait_text("the tree tokens limit (1000) is reached")
    web.wait_idle()
    web.wait_text("tree tokens 600 of 1000", selector=".statusline")
    web.send("/budget tree tokens 5000")
    web.wait_text("tree tokens: 600 of 5,000 (4,400 left)")
    web.wait_idle()
    web.send("continue")
    web.wait_text("done")
    web.wait_idle()
    assert web.errors == []
