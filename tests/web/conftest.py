from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.serve_client import ServeProcess
from tests.wire_client import Sandbox

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def serve(sandbox: Sandbox) -> Iterator[Callable[..., ServeProcess]]:
    """Start the real `soulwire serve` in the sandbox: `serve(*scripts, args=(...))`."""
    started: list[ServeProcess] = []

    def start(*scripts: str, args: tuple[str, ...] = ()) -> ServeProcess:
        if scripts:
            sandbox.scripts = list(scripts)
        server = ServeProcess(sandbox, *args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (no browser download: executable_path)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium package is not installed (apt-get install -y chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()
