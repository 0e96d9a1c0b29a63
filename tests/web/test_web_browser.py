"""The web UI in headless Chromium against a real `soulwire serve` with the scripted model:
a session created and a turn streamed, approvals, cancel, observers, reload and reconnect,
the XSS cases and the trace view. Marked `browser` (CI runs them in their own step)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tool_calls import call
from tests.web.browser import open_page

pytestmark = pytest.mark.browser

LONG_ANSWER = ("The work dir holds hello.txt and nothing else; " * 6).strip()


def create_in_ui(web: Any) -> str:
    web.page.click("#new-session")
    web.page.click("form button[type=submit]")
    web.wait_session()
    return web.page.evaluate("() => window.__soulwire.view.id")


def test_create_stream_approve_reject(chromium, serve, tmp_path):
    server = serve(
        "think: weighing it\ntext: Here is **bold** and `code`\n"
        + call("tc1", "Shell", {"command": "echo approved-output"}),
        call("tc2", "Shell", {"command": "echo never-runs"}),
    )
    web = open_page(chromium, server)
    session_id = create_in_ui(web)
    web.send("please run it")
    dialog = web.approval()
    assert "echo approved-output" in dialog.inner_text()
    assert "left, then rejected" in dialog.inner_text()  # the deadline is visible
    web.shot(tmp_path / "approval.png")
    web.page.keyboard.press("y")
    web.approval()  # the second call asks again
    web.page.keyboard.press("n")  # rejected without feedback: the turn stops there
    web.page.locator(".tool.rejected").wait_for()
    web.wait_idle()
    page = web.page
    assert page.locator(".transcript strong").first.inner_text() == "bold"
    assert page.locator(".thinking").count() == 1
    assert page.locator(".thinking summary").inner_text().startswith("Thinking")
    first, second = page.locator(".tool").all()
    assert "ok" in first.get_attribute("class") and "approved-output" in first.inner_text()
    assert "rejected" in second.get_attribute("class")
    web.shot(tmp_path / "turn.png")
    records = server.api("GET", f"/api/sessions/{session_id}/records").json()["records"]
    results = [
        r["message"]["payload"]["return_value"] for r in records if r["message"]["type"] == "ToolResult"
    ]
    assert [r["is_error"] for r in results] == [False, True]
    assert "rejected by the user" in results[1]["message"]
    assert web.errors == [] and web.dialogs == []


def test_model_and_tool_output_never_run_script(chromium, serve, tmp_path):
    hostile = (
        "<img src=x onerror=window.pwned=1> <script>window.pwned=2</script> [x](javascript:window.pwned=3)"
    )
    server = serve(
        f"text: {hostile}\n"
        + call(
            "tc1",
            "Shell",
            {"command": "printf '%s' '<img src=x onerror=window.pwned=4><script>window.pwned=5</script>'"},
        ),
        "text: <svg onload=window.pwned=6></svg> done",
        args=("--yolo",),
    )
    web = open_page(chromium, server)
    create_in_ui(web)
    web.send("show me")
    web.wait_text("done")
    web.wait_idle()
    page = web.page
    assert page.evaluate("() => window.pwned") is None
    assert page.locator(".transcript img, .transcript script, .transcript svg").count() == 0
    assert page.locator(".transcript a[href^='javascript']").count() == 0
    text = page.locator(".transcript").inner_text()
    assert "<img src=x onerror=window.pwned=1>" in text  # shown as text, not parsed
    assert "<img src=x onerror=window.pwned=4>" in page.locator(".tool-output").inner_text()
    web.shot(tmp_path / "xss.png")
    assert web.dialogs == []
    csp = page.evaluate("async () => (await fetch('/web/')).headers.get('content-security-policy')")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp


def test_stop_cancels_a_running_tool_and_its_process_is_gone(chromium, serve, sandbox, tmp_path):
    pid_file = sandbox.root / "tool.pid"
    server = serve(
        "text: starting\n" + call("tc1", "Shell", {"command": f"echo $$ > {pid_file}; sleep 60"}),
        args=("--yolo",),
    )
    web = open_page(chromium, server)
    create_in_ui(web)
    web.send("run the long thing")
    deadline = time.monotonic() + 15
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    # The tool's process can start before the browser has drawn its call: wait for the card.
    web.page.locator(".tool.running").wait_for(state="visible", timeout=10_000)
    assert web.page.locator(".tool.running").count() == 1
    web.page.keyboard.press("Escape")  # Esc stops the turn, like the Stop button
    web.wait_idle()
    web.wait_text("Stopped")
    assert "cancelled" in web.page.locator(".tool").get_attribute("class")
    deadline = time.monotonic() + 10
    while _alive(pid):
        assert time.monotonic() < deadline, f"the tool's process {pid} survived the cancel"
        time.sleep(0.05)
    assert web.errors == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_second_page_observes_and_a_share_link_is_read_only(chromium, serve):
    server = serve("text: visible to everyone", "text: second answer")
    session_id = server.create_session()
    controller = open_page(chromium, server)
    controller.open_session(session_id)
    assert controller.page.locator(".role-badge").inner_text() == "controlling"
    observer = open_page(chromium, server)  # another browser profile: its own tab storage
    observer.open_session(session_id)
    assert observer.page.locator(".role-badge").inner_text() == "observing"
    assert observer.page.locator("#composer-input").is_disabled()
    minted = server.api("POST", f"/api/sessions/{session_id}/observer-tokens").json()
    guest = open_page(chromium, server, login=False)
    guest.page.goto(f"{server.base}/web/#/observe/{session_id}/{minted['token']}")
    guest.wait_session()
    assert minted["token"] not in guest.page.url  # the token left the address bar
    assert guest.page.locator("#session-list").is_hidden()
    controller.send("hello all")
    for page in (controller, observer, guest):
        page.wait_text("visible to everyone")
    assert observer.count("visible to everyone") == 1 and guest.count("hello all") == 1
    # The observer takes over; the first page becomes an observer.
    observer.page.click("text=Take control")
    observer.page.wait_for_function(
        "() => document.querySelector('.role-badge').textContent === 'controlling'"
    )
    controller.page.wait_for_function(
        "() => document.querySelector('.role-badge').textContent === 'observing'"
    )
    observer.send("my turn now")
    for page in (controller, observer, guest):
        page.wait_text("second answer")
    assert guest.page.locator("#composer-input").is_disabled()
    assert [p.errors for p in (controller, observer, guest)] == [[], [], []]


def test_reload_and_dropped_connection_lose_and_duplicate_nothing(chromium, serve):
    server = serve(
        "text: alpha-before-the-tool\n"
        + call("tc1", "Shell", {"command": "sleep 2; echo mid-output | tr a-z A-Z"}),
        "text: omega-after\n" + call("tc2", "Shell", {"command": "sleep 2; echo second-output | tr a-z A-Z"}),
        "text: final-words",
        args=("--yolo",),
    )
    session_id = server.create_session()
    web = open_page(chromium, server)
    web.open_session(session_id)
    web.send("go")
    web.wait_text("alpha-before-the-tool")
    web.page.reload()  # mid-turn: the page comes back from history + the server's ring
    web.wait_session()
    web.wait_text("omega-after")
    # Now drop the socket itself (as a network failure would); it re-attaches from its last seq.
    web.page.evaluate("() => window.__soulwire.view.conn.ws.close()")
    web.wait_text("final-words")
    web.wait_idle()
    for text in ("alpha-before-the-tool", "MID-OUTPUT", "omega-after", "SECOND-OUTPUT", "final-words"):
        assert web.count(text) == 1, text
    assert web.page.locator(".tool").count() == 2
    assert web.page.locator(".transcript .user").count() == 1
    assert web.page.locator(".role-badge").inner_text() == "controlling"
    # A fresh page shows the same, from the history alone.
    fresh = open_page(chromium, server)
    fresh.open_session(session_id)
    words = "() => [...document.querySelectorAll('.user, .assistant, .tool-what, .tool-output')].map(e => e.innerText)"
    assert fresh.page.evaluate(words) == web.page.evaluate(words)
    # The finished turn came from the recorded history (with its times), not the ring's copy.
    durations = fresh.page.locator(".tool-dur").all_inner_texts()
    assert len(durations) == 2 and all(d.endswith(("ms", "s")) for d in durations), durations


def test_trace_view_of_a_session_with_a_subagent(chromium, serve, tmp_path):
    server = serve(
        "usage: input_other=120 output=30\n"
        + call("a1", "Agent", {"description": "look around", "prompt": "List the files"}),
        "usage: input_other=40 output=10\n" + call("s1", "Shell", {"command": "echo from-the-sub-agent"}),
        f"text: {LONG_ANSWER}",
        "usage: input_other=200 output=5\ntext: parent done",
        args=("--yolo",),
    )
    session_id = server.create_session()
    web = open_page(chromium, server)
    web.open_session(session_id)
    web.send("explore please")
    web.wait_text("parent done")
    web.wait_idle()
    assert web.page.locator(".subagent .tool").count() == 1  # the sub-agent's own tool call, nested
    web.page.click("a.button:has-text('Trace')")
    web.page.wait_for_selector("body[data-trace-ready]")
    rows = web.page.locator(".trace-row")
    labels = rows.all_inner_texts()
    assert any(label.startswith("Turn 1: explore please") for label in labels)
    assert any("sub-agent" in label for label in labels)
    assert any("Shell echo from-the-sub-agent" in label for label in labels)
    assert "150 tok" in web.page.locator(".trace-row.kind-step").first.inner_text()
    web.page.locator(".trace-row.kind-tool").first.click()
    detail = json.loads(web.page.locator(".trace-json").inner_text())
    assert detail[0]["type"] == "ToolCall" and detail[0]["payload"]["function"]["name"] == "Agent"
    web.page.click("[role=tab]:has-text('Events')")
    web.page.locator(".event-row").first.click()
    assert json.loads(web.page.locator(".trace-json").inner_text())["message"]["type"] == "TurnBegin"
    with web.page.expect_download() as download:
        web.page.click("text=Export Markdown")
    markdown = Path(download.value.path()).read_text()
    assert "## Turn 1" in markdown and "> explore please" in markdown and "parent done" in markdown
    with web.page.expect_download() as download:
        web.page.click("text=Export JSON")
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["session"]["id"] == session_id and len(exported["records"]) > 10
    web.shot(tmp_path / "trace.png")
    assert web.errors == []


def test_rename_fork_delete_search_dark_mode_and_phone_width(chromium, serve, tmp_path):
    server = serve("text: the needle-word is here")
    session_id = server.create_session()
    web = open_page(chromium, server, viewport={"width": 390, "height": 800}, color_scheme="dark")
    web.open_session(session_id)
    web.send("find it")
    web.wait_text("needle-word")
    web.wait_idle()
    background = web.page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(22, 22, 24)"  # the dark theme follows the system
    assert web.page.locator("#sidebar").bounding_box()["x"] < 0  # folded away on a phone
    web.page.click("#menu-toggle")
    web.page.wait_for_function("() => document.getElementById('sidebar').getBoundingClientRect().x >= 0")
    web.shot(tmp_path / "phone.png")
    web.page.fill("#session-search", "needle-word")
    web.page.locator(".session-link").first.wait_for()
    assert web.page.locator(".session-link").count() == 1
    web.page.keyboard.press("Escape")
    web.answers.append("Renamed by the test")
    web.page.click("#menu-toggle")
    web.page.click("button:has-text('Rename')")
    web.page.wait_for_function(
        "() => document.querySelector('.session-title-h').textContent === 'Renamed by the test'"
    )
    assert server.api("GET", f"/api/sessions/{session_id}").json()["title"] == "Renamed by the test"
    web.page.click("button:has-text('Fork')")
    web.page.wait_for_function(
        f"() => location.hash.startsWith('#/s/') && !location.hash.includes('{session_id}')"
    )
    web.wait_session()
    assert web.count("needle-word") == 1  # the fork carries the history
    fork_id = web.page.evaluate("() => window.__soulwire.view.id")
    web.answers.append(True)
    web.page.click("button:has-text('Delete')")
    web.page.wait_for_function("() => location.hash === '#/'")
    assert server.api("GET", f"/api/sessions/{fork_id}").status_code == 404
    assert server.api("GET", f"/api/sessions/{session_id}").status_code == 200
    assert web.dialogs == [] and web.errors == []


def test_typing_while_it_runs_steers_the_turn(chromium, serve):
    server = serve(
        "text: working on it\n" + call("tc1", "Shell", {"command": "sleep 2; echo slept"}),
        "text: steered reply",
        args=("--yolo",),
    )
    web = open_page(chromium, server)
    create_in_ui(web)
    web.send("start")
    web.page.locator(".tool.running").wait_for()
    assert web.page.locator("button[type=submit]").inner_text() == "Steer"
    web.send("use python instead")
    web.wait_text("steered reply")
    web.wait_idle()
    assert web.page.locator(".user.steer").inner_text() == "use python instead"
    assert web.page.locator(".transcript .user").count() == 2  # the prompt and the steer, once each
    assert web.errors == []


def test_a_question_dialog_and_a_revocable_session_rule(chromium, serve, tmp_path):
    question = {
        "question": "Which colour?",
        "header": "Colour",
        "options": [{"label": "Red"}, {"label": "Blue", "description": "calm"}],
    }
    server = serve(
        call("q1", "AskUserQuestion", {"questions": [question]}),
        call("tc1", "Shell", {"command": "echo ruled"}),
        "text: noted",
    )
    web = open_page(chromium, server)
    session_id = create_in_ui(web)
    web.send("ask me")
    dialog = web.approval()
    assert "Colour: Which colour?" in dialog.inner_text() and "calm" in dialog.inner_text()
    web.shot(tmp_path / "question.png")
    web.page.keyboard.press("2")
    web.page.keyboard.press("Enter")
    web.approval()  # then the Shell call asks
    web.page.keyboard.press("a")  # approve for the session: a rule
    web.wait_text("noted")
    web.wait_idle()
    records = server.api("GET", f"/api/sessions/{session_id}/records").json()["records"]
    outputs = [
        r["message"]["payload"]["return_value"]["output"]
        for r in records
        if r["message"]["type"] == "ToolResult"
    ]
    assert json.loads(outputs[0]) == {"answers": {"Which colour?": "Blue"}}
    web.page.click("button:has-text('Rules')")
    rules = web.page.locator("dialog[open] .rules li")
    rules.first.wait_for()
    assert rules.count() == 1 and "run command" in rules.inner_text()
    web.page.click("dialog[open] button:has-text('Revoke')")
    web.page.locator("dialog[open]").get_by_text("None yet").wait_for()
    assert web.errors == []


def test_a_long_history_opens_on_its_last_turns_and_shows_the_rest_on_demand(chromium, serve):
    server = serve()
    session_id = server.create_session(title="long")
    directory = Path(server.api("GET", f"/api/sessions/{session_id}").json()["dir"])
    lines = [json.dumps({"type": "metadata", "protocol_version": "1.10"})]
    t = time.time() - 1000
    for n in range(1, 401):
        for message in (
            {"type": "TurnBegin", "payload": {"user_input": f"question {n}"}},
            {"type": "StepBegin", "payload": {"n": 1}},
            {"type": "ContentPart", "payload": {"type": "text", "text": f"answer {n}"}},
            {"type": "TurnEnd", "payload": {}},
        ):
            t += 0.5
            lines.append(json.dumps({"timestamp": t, "message": message}))
    (directory / "wire.jsonl").write_text("\n".join(lines) + "\n")
    web = open_page(chromium, server)
    web.open_session(session_id)
    shown = web.page.locator(".transcript .user").count()
    assert 0 < shown < 400
    assert web.count("answer 400") == 1 and web.count("answer 1\n") == 0
    web.page.click("button.earlier-button")
    web.page.wait_for_function("() => document.querySelectorAll('.transcript .user').length === 400")
    texts = web.page.evaluate(
        "() => [...document.querySelectorAll('.transcript .user')].map(e => e.innerText)"
    )
    assert texts == [f"question {n}" for n in range(1, 401)]  # in order, each once
    assert web.errors == []


def test_an_event_larger_than_a_message_arrives_by_reference_and_loads_on_demand(chromium, serve, sandbox):
    content = "".join(f"line {n}\n" for n in range(12_000)) + "END-OF-BIG\n"  # ~100 KB of arguments
    server = serve(
        call("tc1", "WriteFile", {"path": "big.txt", "content": content}),
        "text: wrote a lot",
        args=("--yolo", "--max-message-bytes", "65536"),
    )
    web = open_page(chromium, server)
    create_in_ui(web)
    web.send("write a lot")
    web.wait_text("wrote a lot")
    web.wait_idle()
    assert (sandbox.work / "big.txt").read_text() == content
    card = web.page.locator(".tool")
    assert "ok" in card.get_attribute("class") and "WriteFile" in card.inner_text()
    load = web.page.locator("button:has-text('Load the arguments')")
    assert load.count() == 1  # the ToolCall was over the 64 KiB limit: a blob reference
    load.click()
    web.page.wait_for_function(
        "() => document.querySelector('.tool-args pre')?.textContent.includes('END-OF-BIG')"
    )
    assert web.page.locator(".tool-what").inner_text() == "big.txt"
    assert web.errors == []


MARKDOWN = """## Plan

1. Read `app.py`
2. Fix **greet**

| file | change |
| --- | --- |
| app.py | f-string |

```python
def greet(name):
    return f"Hello, {name}!"  # friendlier
```

> quoted <b>not bold</b>

[docs](https://example.org/docs) and [bad](javascript:alert(1)) and <script>alert(2)</script>
"""


def test_markdown_of_a_recorded_answer(chromium, serve, tmp_path):
    server = serve()
    session_id = server.create_session(title="markdown")
    directory = Path(server.api("GET", f"/api/sessions/{session_id}").json()["dir"])
    t = time.time()
    messages = [
        {"type": "TurnBegin", "payload": {"user_input": "explain"}},
        {"type": "StepBegin", "payload": {"n": 1}},
        {"type": "ContentPart", "payload": {"type": "think", "think": "a plan first", "encrypted": None}},
        {"type": "ContentPart", "payload": {"type": "text", "text": MARKDOWN}},
        {"type": "TurnEnd", "payload": {}},
    ]
    lines = [json.dumps({"type": "metadata", "protocol_version": "1.10"})]
    lines += [json.dumps({"timestamp": t + i, "message": m}) for i, m in enumerate(messages)]
    (directory / "wire.jsonl").write_text("\n".join(lines) + "\n")
    web = open_page(chromium, server)
    web.open_session(session_id)
    answer = web.page.locator(".assistant")
    assert answer.locator("h4").inner_text() == "Plan"
    assert answer.locator("ol li").all_inner_texts() == ["Read app.py", "Fix greet"]
    assert answer.locator("table td").all_inner_texts() == ["app.py", "f-string"]
    code = answer.locator(".codeblock code.lang-python")
    assert 'return f"Hello, {name}!"' in code.inner_text()
    assert (
        code.locator(".tok-k").first.inner_text() == "def"
        and code.locator(".tok-c").inner_text() == "# friendlier"
    )
    assert answer.locator("blockquote").inner_text() == "quoted <b>not bold</b>"
    links = answer.locator("a")
    assert links.count() == 1 and links.get_attribute("href") == "https://example.org/docs"
    assert links.get_attribute("rel") == "noopener noreferrer nofollow"
    assert answer.locator("script, b").count() == 0
    assert "and bad and" in answer.inner_text()  # the refused link stays as its text
    assert web.page.locator(".thinking").get_attribute("open") is None  # folded by default
    web.shot(tmp_path / "markdown.png")
    assert web.errors == [] and web.dialogs == []


def test_an_unanswered_approval_expires_at_its_deadline_and_the_dialog_goes(chromium, serve):
    server = serve(call("tc1", "Shell", {"command": "echo never"}), args=("--request-timeout", "2"))
    web = open_page(chromium, server)
    create_in_ui(web)
    web.send("try it")
    dialog = web.approval()
    assert "then rejected" in dialog.inner_text()
    web.page.wait_for_selector("dialog.request-dialog[open]", state="detached", timeout=15_000)
    web.page.locator(".tool.rejected").wait_for()  # the server applied its default: reject
    web.wait_idle()
    assert web.errors == []


def test_attach_a_file_see_the_changes_and_edit_the_config(chromium, serve, sandbox):
    git = ["git", "-C", str(sandbox.work), "-c", "user.name=t", "-c", "user.email=t@t"]
    server = serve("text: got the file")
    (sandbox.work / "a.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (sandbox.work / "a.txt").write_text("two\n")
    notes = sandbox.root / "notes.md"
    notes.write_text("# my notes\n")
    web = open_page(chromium, server)
    session_id = create_in_ui(web)
    web.page.set_input_files("input[type=file]", str(notes))
    web.page.locator(".chip").get_by_text("notes.md").wait_for()
    web.send("read my notes")
    web.wait_text("got the file")
    records = server.api("GET", f"/api/sessions/{session_id}/records").json()["records"]
    prompt = records[0]["message"]["payload"]["user_input"]
    uploaded = Path(prompt.split("Attached files:\n- ")[1].strip())
    assert uploaded.read_text() == "# my notes\n" and uploaded.parent.name == "uploads"
    web.page.click("button:has-text('Changes')")
    changes = web.page.locator("dialog[open]")
    changes.locator(".u-add").first.wait_for()
    assert "M a.txt" in changes.inner_text() and "+two" in changes.inner_text()
    web.page.keyboard.press("Escape")
    web.page.click("#nav-config")
    web.page.click("#config-tab-raw")
    text = web.page.locator("#config-text")
    text.wait_for()
    web.page.wait_for_function("() => document.getElementById('config-text').value.includes('scripted')")
    original = text.input_value()
    before = sandbox.config_path.read_text()
    text.fill('{"default_model": 5}')
    web.page.click("#config-save-raw")
    web.page.locator(".config-error").get_by_text("default_model").wait_for()
    assert sandbox.config_path.read_text() == before  # refused, untouched
    changed = json.loads(original)
    changed["loop_control"] = {"max_steps_per_turn": 9}
    text.fill(json.dumps(changed))
    web.page.click("#config-save-raw")
    web.page.locator(".toast").get_by_text("Configuration saved").wait_for()
    assert json.loads(sandbox.config_path.read_text())["loop_control"] == {"max_steps_per_turn": 9}
    assert [
        e for e in web.errors if "status of 422" not in e
    ] == [] and web.dialogs == []  # (the refused save)
