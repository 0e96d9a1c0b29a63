"""What the command line asks of a session. Light on purpose: parsed before heavy imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulwire.wire.session_settings import SessionSettings

if TYPE_CHECKING:
    from soulwire.sessions.backend import SessionStores


@dataclass
class SessionOptions(SessionSettings):
    """The session's settings (`SessionSettings`: model, thinking, yolo, limits, sandbox,
    approval, plan mode; per session, so hosts of many sessions, `serve` and fleets, set them
    too) and what the engine needs besides to open it."""

    work_dir: Path
    share_dir: Path
    raw_config: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None
    afk: bool = False
    session_id: str | None = None
    continue_last: bool = False
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
    stores: SessionStores | None = None
    """Where the session is kept (None: the share dir's files; `serve --store` passes its
    PostgreSQL stores)."""
    continue_turn: bool = False
    """A turn a dead process left waiting only for approvals is continued — its approvals
    asked again — instead of closed as interrupted (`serve`, which takes sessions over from
    their store; engine/recovery.py). The CLI's resume closes it."""
    keep_empty_session: bool = False
    """Keep the session's directory at close even when nothing was said (a server's session
    exists from its creation on)."""
