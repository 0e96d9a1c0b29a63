"""Fixtures for the SDK suite: the real `soulwire --wire` (and the reference `kimi --wire`
when SOULWIRE_REFERENCE_KIMI points at it) in a private sandbox, plus the fake protocol peer."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.wire_client import Sandbox

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
REFERENCE_ENV = "SOULWIRE_REFERENCE_KIMI"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def reference_kimi() -> str | None:
    """The reference `kimi` executable to compare with, if configured and present."""
    path = os.environ.get(REFERENCE_ENV)
    if not path:
        return None
    found = shutil.which(path)
    return found if found and os.access(found, os.X_OK) else None


@dataclass
class Engine:
    """One engine under test in its sandbox; `options(*scripts)` gives Session kwargs."""

    name: str
    sandbox: Sandbox
    executable: list[str]

    @property
    def is_reference(self) -> bool:
        return self.name == "kimi"

    def options(self, *scripts: str, **extra: Any) -> dict[str, Any]:
        if scripts:
            self.sandbox.scripts = list(scripts)
        self.sandbox.write()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_"))}
        env.update({"HOME": str(self.sandbox.home), "KIMI_DISABLE_TELEMETRY": "1"})
        options: dict[str, Any] = {
            "executable": self.executable,
            "config_file": self.sandbox.config_path,
            "work_dir": self.sandbox.work,
            "share_dir": self.sandbox.share,
            "env": env,
            "inherit_env": False,
            "approval_timeout": 30.0,
            "startup_timeout": 60.0,
        }
        options.update(extra)
        return options


ENGINE_ENV = "SOULWIRE_TEST_ENGINE"


def soulwire_argv() -> list[str]:
    """The engine under test: this interpreter's `soulwire`, or the command in
    SOULWIRE_TEST_ENGINE (CI runs these tests from a venv with soulwire-sdk alone, against
    an engine installed in another)."""
    command = os.environ.get(ENGINE_ENV)
    return shlex.split(command) if command else [sys.executable, "-m", "soulwire"]


@pytest.fixture
def soulwire(tmp_path: Path) -> Engine:
    """The real soulwire engine (every SDK path is tested against it)."""
    return Engine("soulwire", Sandbox(tmp_path), soulwire_argv())


@pytest.fixture(params=["soulwire", "kimi"])
def any_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    """soulwire, and the reference kimi when SOULWIRE_REFERENCE_KIMI is set (skipped otherwise)."""
    if request.param == "kimi":
        kimi = reference_kimi()
        if kimi is None:
            pytest.skip(f"reference kimi not configured: set {REFERENCE_ENV}=/path/to/kimi (see docs/sdk.md)")
        return Engine("kimi", Sandbox(tmp_path), [kimi])
    return Engine("soulwire", Sandbox(tmp_path), soulwire_argv())


@pytest.fixture
def fake() -> Iterator[Any]:
    """Session kwargs for the fake protocol peer: `fake("approvals")`."""

    def options(scenario: str, *args: str, **extra: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "executable": [sys.executable, str(FAKE_ENGINE), scenario, *args],
            "approval_timeout": 30.0,
            "startup_timeout": 20.0,
        }
        base.update(extra)
        return base

    yield options


def process_group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is `pgid` (Linux /proc)."""
    members: list[int] = []
    for entry in (p.name for p in Path("/proc").iterdir()):
        if not entry.isdigit():
            continue
        try:
            with Path(f"/proc/{entry}/stat").open() as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members
