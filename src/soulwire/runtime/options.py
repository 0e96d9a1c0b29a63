"""What the command line asks of a session. Light on purpose: parsed before heavy imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class SessionOptions:
    work_dir: Path
    share_dir: Path
    raw_config: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None
    model_alias: str | None = None
    thinking: bool | None = None
    yolo: bool = False
    afk: bool = False
    plan: bool = False
    session_id: str | None = None
    continue_last: bool = False
    max_steps_per_turn: int | None = None
    max_retries_per_step: int | None = None
    max_ralph_iterations: int | None = None
    agent: str | None = None
    """A built-in agent (`default`, `okabe`); `agent_file` is a custom one (exclusive)."""
    agent_file: Path | None = None
    skills_dirs: list[Path] = field(default_factory=list)
    add_dirs: list[Path] = field(default_factory=list)
    mcp_config_files: list[Path] = field(default_factory=list)
    mcp_configs: list[str] = field(default_factory=list)
    print_mode: bool = False
    sandbox: str | None = None
    """`off`, `read-only` or `workspace-write`; None: the session's stored mode, else the
    config's. A per-session option, so hosts of many sessions (`serve`, fleets) can set it."""
    sandbox_network: bool | None = None
    """Network inside the sandbox; None: stored, else config (default off)."""
    approval: str | None = None
    """`ask` or `on-escape`; None: the config's `approval`."""
    keep_empty_session: bool = False
    """Keep the session's directory at close even when nothing was said (a server's session
    exists from its creation on)."""
