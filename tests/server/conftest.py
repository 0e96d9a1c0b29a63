from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest

from tests.server.serve_client import ServeProcess
from tests.wire_client import Sandbox


@pytest.fixture
def serve(sandbox: Sandbox) -> Iterator[Callable[..., ServeProcess]]:
    """Start the real `soulwire serve` in the sandbox: `serve(*scripts, args=(...))`."""
    started: list[ServeProcess] = []

    def start(
        *scripts: str,
        args: tuple[str, ...] = (),
        stdin: int = subprocess.DEVNULL,
        expect: int = 1,
        env: dict[str, str] | None = None,
    ) -> ServeProcess:
        if scripts:
            sandbox.scripts = list(scripts)
        server = ServeProcess(sandbox, *args, stdin=stdin, expect=expect, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
