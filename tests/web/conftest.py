from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import serve  # the same `serve` fixture as the server suite
from tests.system_tools import require

__all__ = ["serve"]

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (no browser download: executable_path)."""
    from playwright.sync_api import sync_playwright  # (in the dev extra)

    path = CHROMIUM if Path(CHROMIUM).exists() else require("chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()
