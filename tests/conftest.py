from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.wire_client import Sandbox, WireProcess


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path)


@pytest.fixture
def engine(sandbox: Sandbox) -> Iterator[Callable[..., WireProcess]]:
    """Start the real `soulwire --wire` in the sandbox: `engine(*scripts, args=[...])`."""
    started: list[WireProcess] = []

    def start(*scripts: str, args: tuple[str, ...] = ()) -> WireProcess:
        if scripts:
            sandbox.scripts = list(scripts)
        sandbox.write()
        proc = WireProcess(sandbox.argv(*args), sandbox.env(), sandbox.work)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()
