"""The web UI's speed, in the browser's own clock (headless Debian chromium via Playwright,
against a real `soulwire serve` on loopback with the scripted model):

* time to interactive: navigation start → the app shell routed and the session list shown,
  and → a session attached and its history drawn;
* a large streamed turn: N one-word chunks, from Enter to the turn's end on screen, with the
  main thread's long tasks (> 50 ms) while it streams — the page must never freeze;
* opening a session of 10,000 recorded events, in the session view and in the trace view.

    .venv/bin/python bench/web_bench.py --chunks 50000 --events 10000 --runs 5
    .venv/bin/python bench/web_bench.py --screenshots docs/img   # also refresh the README's pictures
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.sync_api import sync_playwright
from tests.server.serve_client import ServeProcess
from tests.tool_calls import call
from tests.wire_client import Sandbox

TURN_DONE = (
    "() => !document.querySelector('.session-view.busy') && document.querySelector('.turn-foot')?.textContent"
)
WORDS = "() => document.querySelector('.assistant').innerText.split(/\\s+/).filter(Boolean).length"
LONG_TASKS = """() => {
  window.__longTasks = [];
  new PerformanceObserver(list => { for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
    .observe({type: 'longtask', buffered: false});
  window.__frames = 0;
  const tick = () => { window.__frames++; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
}"""


def write_big_session(server: ServeProcess, events: int) -> str:
    """A session whose wire.jsonl holds `events` records (turns of text, a tool call and usage)."""
    session_id = server.create_session(title=f"{events} events")
    directory = Path(server.api("GET", f"/api/sessions/{session_id}").json()["dir"])
    lines = [json.dumps({"type": "metadata", "protocol_version": "1.10"})]
    t = time.time() - events * 0.01
    turn = 0
    while len(lines) - 1 < events:
        turn += 1
        messages: list[dict[str, Any]] = [
            {"type": "TurnBegin", "payload": {"user_input": f"question {turn}: what does step {turn} do?"}},
            {"type": "StepBegin", "payload": {"n": 1}},
            {
                "type": "ContentPart",
                "payload": {"type": "think", "think": f"thinking about {turn}", "encrypted": None},
            },
            {
                "type": "ContentPart",
                "payload": {"type": "text", "text": f"Let me look at **file_{turn}.py** with `grep`."},
            },
            {
                "type": "ToolCall",
                "payload": {
                    "type": "function",
                    "id": f"tc{turn}",
                    "function": {
                        "name": "Shell",
                        "arguments": json.dumps({"command": f"grep -n step file_{turn}.py"}),
                    },
                    "extras": None,
                },
            },
            {
                "type": "StatusUpdate",
                "payload": {
                    "context_usage": 0.01,
                    "context_tokens": 1000 + turn,
                    "max_context_tokens": 100000,
                    "token_usage": {
                        "input_other": 100,
                        "output": 20,
                        "input_cache_read": 0,
                        "input_cache_creation": 0,
                    },
                    "message_id": None,
                    "plan_mode": False,
                    "mcp_status": None,
                },
            },
            {
                "type": "ToolResult",
                "payload": {
                    "tool_call_id": f"tc{turn}",
                    "return_value": {
                        "is_error": False,
                        "output": f"{turn}: step = {turn}\n",
                        "message": "",
                        "display": [],
                        "extras": None,
                    },
                },
            },
            {"type": "StepBegin", "payload": {"n": 2}},
            {
                "type": "ContentPart",
                "payload": {"type": "text", "text": f"Step {turn} sets `step` to {turn}.\n\n- one\n- two"},
            },
            {"type": "TurnEnd", "payload": {}},
        ]
        for message in messages:
            t += 0.01
            lines.append(json.dumps({"timestamp": t, "message": message}))
    (directory / "wire.jsonl").write_text("\n".join(lines[: events + 1]) + "\n")
    return session_id


def login(browser: Any, server: ServeProcess, **context: Any) -> Any:
    page = browser.new_context(**context).new_page()
    page.goto(f"{server.base}/web/login?token={server.token}")
    page.wait_for_selector("body[data-ready='1']")
    return page


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshots", metavar="DIR", help="also save the README's screenshots here")
    parser.add_argument("--screenshots-only", action="store_true", help="only the screenshots, no timings")
    args = parser.parse_args()
    if args.screenshots_only:
        with sync_playwright() as playwright, tempfile.TemporaryDirectory() as shots:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            screenshots(browser, Sandbox(Path(shots)), Path(args.screenshots or "docs/img"))
            browser.close()
        return

    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Sandbox(Path(tmp))
        stream = "\n".join(f"text:  w{i}" for i in range(args.chunks))  # " w0", " w1", …
        sandbox.scripts = [stream] + ["text: short answer"] * (args.runs + 2)
        server = ServeProcess(sandbox, "--yolo")
        results: dict[str, Any] = {}
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                # 1. Time to interactive (a warm server; each run a fresh browser context).
                big = write_big_session(server, args.events)
                shell: list[float] = []
                session: list[float] = []
                small = server.create_session(title="small")
                for _ in range(args.runs):
                    page = login(browser, server)
                    shell.append(page.evaluate("() => window.__soulwireReady"))
                    page.context.close()
                    page = browser.new_context().new_page()
                    page.goto(f"{server.base}/web/login?token={server.token}&next=/web/%23/s/{small}")
                    page.wait_for_selector(".session-view[data-ready]")
                    session.append(page.evaluate("() => window.__soulwireSessionReady"))
                    page.context.close()
                results["interactive_shell_ms"] = median(shell)
                results["interactive_session_ms"] = median(session)

                # 2. A large streamed turn.
                page = login(browser, server)
                page.goto(f"{server.base}/web/#/s/{server.create_session(title='stream')}")
                page.wait_for_selector(".session-view[data-ready]")
                page.evaluate(LONG_TASKS)
                page.fill("#composer-input", "stream please")
                started = page.evaluate("() => performance.now()")
                page.press("#composer-input", "Enter")
                page.wait_for_function(TURN_DONE, timeout=600_000)
                ended = page.evaluate("() => performance.now()")
                tasks = page.evaluate("() => window.__longTasks")
                frames = page.evaluate("() => window.__frames")
                words = page.evaluate(WORDS)
                assert words == args.chunks, (words, args.chunks)
                seconds = (ended - started) / 1000
                results["stream"] = {
                    "chunks": args.chunks,
                    "seconds": round(seconds, 2),
                    "chunks_per_s": round(args.chunks / seconds),
                    "fps": round(frames / seconds, 1),
                    "long_tasks": len(tasks),
                    "longest_task_ms": max(tasks, default=0),
                }
                page.context.close()

                # 3. Opening a 10,000-event session: the live view and the trace view.
                opened: list[float] = []
                traced: list[float] = []
                for _ in range(args.runs):
                    page = browser.new_context().new_page()
                    page.goto(f"{server.base}/web/login?token={server.token}&next=/web/%23/s/{big}")
                    page.wait_for_selector(".session-view[data-ready]", timeout=60_000)
                    opened.append(page.evaluate("() => window.__soulwireSessionReady"))
                    page.goto(f"{server.base}/web/#/config")
                    page.goto(f"{server.base}/web/#/trace/{big}")
                    page.reload()
                    page.wait_for_selector("body[data-trace-ready]", timeout=60_000)
                    traced.append(page.evaluate("() => window.__soulwireTraceReady"))
                    page.context.close()
                results["open_session_ms"] = {"events": args.events, "median": median(opened), "all": opened}
                results["open_trace_ms"] = {"events": args.events, "median": median(traced), "all": traced}
                if args.screenshots:
                    with tempfile.TemporaryDirectory() as shots:
                        screenshots(browser, Sandbox(Path(shots)), Path(args.screenshots))
                browser.close()
        finally:
            server.close()
    print(json.dumps(results, indent=2))


def screenshots(browser: Any, sandbox: Sandbox, out: Path) -> None:
    """The README's pictures: a turn with a tool call and a diff, an approval, the trace, dark + phone."""
    out.mkdir(parents=True, exist_ok=True)
    sandbox.work.mkdir(parents=True)
    (sandbox.work / "app.py").write_text("def greet(name):\n    return 'hi ' + name\n\nprint(greet('web'))\n")
    edit = {"path": "app.py", "edit": {"old": "return 'hi ' + name", "new": "return f'Hello, {name}!'"}}
    scripts = [
        "think: The user wants a friendlier greeting; the function lives in app.py.\n"
        "text: I'll update `greet` in **app.py** to use an f-string, then run it.\n"
        + call("e1", "StrReplaceFile", edit),
        call("r1", "Shell", {"command": "python3 app.py"}),
        "usage: input_other=1800 output=120\n"
        "text: Done: `greet()` now returns **Hello, web!** and the script prints it.",
        call("a1", "Agent", {"description": "review", "prompt": "Review app.py"}),
        "text: " + ("The file is small and the change is safe; nothing else calls greet. " * 4).strip(),
        "usage: input_other=2400 output=60\ntext: The sub-agent found nothing else to change.",
    ]
    sandbox.scripts = scripts
    server = ServeProcess(sandbox)
    try:
        _screenshots(browser, server, out)
    finally:
        server.close()


def _screenshots(browser: Any, server: ServeProcess, out: Path) -> None:
    session_id = server.create_session(title="Friendlier greeting")
    page = login(browser, server, viewport={"width": 1280, "height": 860})
    page.goto(f"{server.base}/web/#/s/{session_id}")
    page.wait_for_selector(".session-view[data-ready]")
    page.fill("#composer-input", "Make the greeting in app.py friendlier and run it")
    page.press("#composer-input", "Enter")
    page.wait_for_selector("dialog[open]")
    page.screenshot(path=str(out / "web-approval.png"))
    page.keyboard.press("y")
    page.wait_for_selector("dialog[open]")
    page.keyboard.press("y")
    page.wait_for_function("() => !document.querySelector('.session-view.busy')")
    page.wait_for_timeout(300)
    page.screenshot(path=str(out / "web-session.png"))
    page.fill("#composer-input", "Ask a sub-agent to review it")
    page.press("#composer-input", "Enter")
    page.wait_for_function("() => !document.querySelector('.session-view.busy')")
    page.goto(f"{server.base}/web/#/trace/{session_id}")
    page.wait_for_selector("body[data-trace-ready]")
    page.locator(".trace-row.kind-tool").nth(2).click()
    page.screenshot(path=str(out / "web-trace.png"))
    phone = login(
        browser, server, viewport={"width": 390, "height": 844}, color_scheme="dark", device_scale_factor=1
    )
    phone.goto(f"{server.base}/web/#/s/{session_id}")
    phone.wait_for_selector(".session-view[data-ready]")
    phone.wait_for_timeout(300)
    phone.screenshot(path=str(out / "web-phone-dark.png"))


if __name__ == "__main__":
    main()
