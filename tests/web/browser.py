"""Browser-side helpers for the web UI tests: a logged-in page of a real server, with every
script error, console error and JavaScript dialog (an XSS would open one) collected."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.server.serve_client import ServeProcess

TIMEOUT_MS = 15_000


@dataclass
class WebPage:
    page: Any
    server: ServeProcess
    errors: list[str] = field(default_factory=list[str])
    dialogs: list[str] = field(default_factory=list[str])
    """Messages of JavaScript dialogs nobody expected (an injected alert() would land here)."""
    answers: list[str | bool] = field(default_factory=list[str | bool])
    """Replies to the app's own prompt()/confirm() (rename, delete), used in order."""

    def open_session(self, session_id: str) -> None:
        self.page.goto(f"{self.server.base}/web/#/s/{session_id}")
        self.wait_session()

    def wait_session(self) -> None:
        self.page.wait_for_selector(".session-view[data-ready]", timeout=TIMEOUT_MS)

    def send(self, text: str) -> None:
        self.page.fill("#composer-input", text)
        self.page.press("#composer-input", "Enter")

    def wait_text(self, text: str, selector: str = ".transcript") -> None:
        self.page.locator(selector).get_by_text(text, exact=False).first.wait_for(timeout=TIMEOUT_MS)

    def wait_idle(self) -> None:
        self.page.wait_for_function("() => !document.querySelector('.session-view.busy')", timeout=TIMEOUT_MS)

    def count(self, text: str) -> int:
        return self.page.evaluate(
            "t => document.querySelector('.transcript').innerText.split(t).length - 1", text
        )

    def approval(self) -> Any:
        dialog = self.page.locator("dialog.request-dialog[open]")
        dialog.wait_for(timeout=TIMEOUT_MS)
        return dialog

    def shot(self, path: Any) -> None:
        self.page.screenshot(path=str(path))


def open_page(
    browser: Any, server: ServeProcess, *, login: bool = True, init_script: str | None = None, **context: Any
) -> WebPage:
    """A fresh browser context (its own cookies and tab storage) on the server's web app
    (`init_script`: run in every page before the app's own scripts)."""
    ctx = browser.new_context(**context)
    if init_script is not None:
        ctx.add_init_script(init_script)
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    web = WebPage(page, server)
    page.on("pageerror", lambda exc: web.errors.append(str(exc)))
    page.on("console", lambda m: web.errors.append(m.text) if m.type == "error" else None)

    def on_dialog(dialog: Any) -> None:
        if web.answers:
            answer = web.answers.pop(0)
            dialog.accept(answer) if isinstance(answer, str) else dialog.accept()
            return
        web.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    if login:
        page.goto(f"{server.base}/web/login?token={server.token}")
        page.wait_for_selector("body[data-ready='1']", timeout=TIMEOUT_MS)
    return web
