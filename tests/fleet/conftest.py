"""Fleet fixtures: tasks driven by the scripted offline model, each with its own scripts file,
and engines isolated in a private HOME and share dir."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from soulwire.fleet import EngineSettings, LocalBackend, WarmBackend
from tests.wire_client import scripted_config


def call(call_id: str, name: str, args: dict[str, Any]) -> str:
    return "tool_call: " + json.dumps({"id": call_id, "name": name, "arguments": json.dumps(args)})


def write_file(path: str, content: str, call_id: str = "w1") -> str:
    return call(call_id, "WriteFile", {"path": path, "content": content})


def shell(command: str, call_id: str = "s1") -> str:
    return call(call_id, "Shell", {"command": command})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class FleetLab:
    """A directory to build task files in, with scripted models and an isolated engine env."""

    root: Path
    lines: list[dict[str, Any]] = field(default_factory=lambda: [])

    @property
    def share(self) -> Path:
        return self.root / "share"

    @property
    def env(self) -> dict[str, str]:
        """The engines' environment: a private HOME and share dir, no real provider keys."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KIMI_", "SOULWIRE_", "OPENAI_", "ANTHROPIC_"))
        }
        env.update(
            {
                "HOME": str(self.root / "home"),
                "SOULWIRE_SHARE_DIR": str(self.share),
                "KIMI_SHARE_DIR": str(self.share),
                "KIMI_DISABLE_TELEMETRY": "1",
            }
        )
        return env

    def settings(self, **fields: Any) -> EngineSettings:
        return EngineSettings(share_dir=self.share, env=self.env, inherit_env=False, **fields)

    def backend(self) -> LocalBackend:
        return LocalBackend(self.settings())

    def warm_backend(self, engines: int = 1, **fields: Any) -> WarmBackend:
        """Warm `soulwire serve` engines, `engines` per set of engine settings."""
        return WarmBackend(self.settings(**fields), engines_per_group=engines)

    def workspace(self, name: str, files: dict[str, str]) -> Path:
        path = self.root / "sources" / name
        for relative, text in files.items():
            (path / relative).parent.mkdir(parents=True, exist_ok=True)
            (path / relative).write_text(text)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def task(self, task_id: str, *scripts: str, shared: str | None = None, **fields: Any) -> dict[str, Any]:
        """A task line whose model plays `scripts`, one per model call. Tasks with the same
        `shared` name have the same configuration (so warm engines host them together)."""
        scripts_file = self.root / "scripts" / f"{shared or task_id}.json"
        scripts_file.parent.mkdir(parents=True, exist_ok=True)
        scripts_file.write_text(json.dumps(list(scripts)))
        line: dict[str, Any] = {
            "id": task_id,
            "prompt": f"do {task_id}",
            "config": scripted_config(scripts_file),
            "approval": "yolo",
            "time_limit": 60,
        }
        line.update(fields)
        self.lines.append(line)
        return line

    def write_tasks(self, name: str = "tasks.jsonl") -> Path:
        path = self.root / name
        path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return path


@pytest.fixture
def lab(tmp_path: Path) -> FleetLab:
    return FleetLab(tmp_path)


def soulwire_cli() -> list[str]:
    return [sys.executable, "-m", "soulwire"]
