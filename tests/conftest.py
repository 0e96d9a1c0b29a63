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


@pytest.fixture(scope="module")
def shared_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], WireProcess]]:
    """One initialized engine for a module's tests that each only send something and read the
    answer, leaving it serving (bad input, say): `shared_engine()` returns it, its inbox
    drained, or a new one if a test ended it. Its scripted model answers every prompt with
    `text: still there`. Not for a test that needs a fresh process (the first line, start-up
    flags, the session's files)."""
    started: list[WireProcess] = []

    def current() -> WireProcess:
        if started and started[-1].proc.poll() is None:
            wire = started[-1]
            try:  # a barrier: whatever an earlier test left unread is dropped with it
                wire.until_response(wire.request("cancel"), timeout=5)
                return wire
            except (TimeoutError, EOFError):
                wire.close(timeout=1)
        sandbox = Sandbox(tmp_path_factory.mktemp("shared-engine"))
        sandbox.scripts = ["text: still there"] * 1000
        sandbox.write()
        wire = WireProcess(sandbox.argv(), sandbox.env(), sandbox.work)
        started.append(wire)
        assert "result" in wire.initialize(), "".join(wire.stderr_lines)
        return wire

    yield current
    for wire in started:
        wire.close()


@pytest.fixture
def bwrap() -> None:
    """A test that runs commands under bubblewrap (`@needs_bwrap`): fails when it is not
    installed, skips only where the kernel refuses its namespaces."""
    from tests.system_tools import require_bwrap

    require_bwrap()
